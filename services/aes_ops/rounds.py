"""Driving flywheel rounds from outside the services, and following them on the bus.

A round starts with a ``PoolReview`` (plan only, or review then plan); the
planner answers with assignments; each assignment ends, possibly after
revisions, in a final ``CalibrationResult`` (admitted, or not sent back) or in
a dead letter. ``RoundTracker`` turns the stream of messages into "is the round
over", ``describe`` into one progress line per stage outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Union

import msgspec

from aes_proto import subjects
from aes_proto.messages import (
    MESSAGE_TYPES,
    Assignment,
    CalibrationResult,
    CandidateEnv,
    ContaminationResult,
    DeadLetter,
    GateResult,
    Lineage,
    Message,
    PoolEvent,
    PoolPlan,
    PoolReview,
    ReviewResult,
    RolloutSummary,
    ValidationResult,
)

from aes_lib.flywheel.status import outcome_label

_any = msgspec.msgpack.Decoder(Union[MESSAGE_TYPES])  # type: ignore[valid-type]


def decode_any(data: bytes) -> Message | None:
    """Any wire message by its type tag; None for bytes that are no message of ours."""
    try:
        return _any.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError):
        return None


class BusFeed:
    """Every message published on ``aes.>`` from the moment it is opened, decoded, in order.

    ``run_rounds`` and the training waves after each round read one feed, so nothing
    published between the two phases is missed or seen twice."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[tuple[str, bytes]] = asyncio.Queue()

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, bus) -> AsyncIterator["BusFeed"]:
        feed = cls()

        async def on_msg(msg) -> None:
            feed._queue.put_nowait((msg.subject, msg.data))

        sub = await bus.nc.subscribe("aes.>", cb=on_msg)
        try:
            yield feed
        finally:
            await sub.unsubscribe()

    async def next(self, timeout: float) -> tuple[str, Message] | None:
        """The next message of ours with its subject; None once ``timeout`` seconds pass without one."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                subject, data = await asyncio.wait_for(self._queue.get(), max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                return None
            if (m := decode_any(data)) is not None:
                return subject, m


def _short(env_id: str) -> str:
    return env_id[:12] or "-"


def describe(subject: str, m: Message) -> str | None:
    """One progress line for a stage outcome; None for messages not worth a line."""
    match m:
        case Assignment():
            lin = m.lineage
            return (f"assignment {lin.assignment_id} rev{lin.revision}: {m.direction} from {_short(lin.parent_env_id or '')}"
                    f" [{lin.category or 'uncategorized'}]")
        case CandidateEnv():
            lin = m.lineage
            return f"  candidate {_short(m.env_id)} ({lin.assignment_id} rev{lin.revision}) -> {subject.rsplit('.', 1)[-1]}"
        case ValidationResult():
            return f"  validate {_short(m.env_id)}: {m.reason}"
        case ContaminationResult():
            return f"  contamination {_short(m.env_id)}: {'ok' if m.ok else 'overlap ' + repr(m.matched_ngram[:40])}"
        case ReviewResult():
            return f"  review {_short(m.env_id)}: {'ok' if m.ok else 'failed'}{'' if m.enforced else ' (advisory)'}"
        case GateResult():
            return f"  {m.gate} {_short(m.env_id)}: {m.reason}"
        case RolloutSummary() if m.role == "solver":
            return f"    {m.purpose} rollout on {_short(m.env_id)}: reward {m.reward:.2f}" + (f" ({m.failure[:60]})" if m.failure else "")
        case CalibrationResult():
            lin = m.lineage
            tail = f", revision {lin.revision + 1} requested" if m.resubmitted else ""
            reward = "" if lin.mode == "seed" else f", proposer reward {m.proposer_reward:.2f}"  # a seed has no proposer
            return f"result {lin.assignment_id} rev{lin.revision}: {outcome_label(m)} (mean {m.mean:.2f}{reward}){tail}"
        case PoolEvent():
            return f"pool: {m.kind} {_short(m.env_id)} ({m.reason}); size {m.pool_size}"
        case DeadLetter():
            return f"dead letter from {m.consumer} after {m.deliveries} deliveries: {m.error[:120]}"
    return None


@dataclasses.dataclass
class RoundTracker:
    """Whether every assignment of ``round`` has reached its end."""

    round: int
    expected: int | None = None
    """Assignment groups the planner will publish; known once the plan step is seen."""
    groups: dict[str, int] = dataclasses.field(default_factory=dict)
    """Group id -> parallel attempts the planner issued for it."""
    started: set[str] = dataclasses.field(default_factory=set)
    finished: dict[str, str] = dataclasses.field(default_factory=dict)
    """Assignment id -> how it ended (outcome label or ``dead_letter``)."""

    def observe(self, m: Message) -> None:
        match m:
            case PoolPlan() if m.round == self.round:
                self.expected = m.fresh + len(m.retired)
            case Assignment() if m.lineage.round == self.round:
                self.started.add(m.lineage.assignment_id)
                self.groups[m.group_id or m.lineage.assignment_id] = m.group_size
            case CalibrationResult() if m.lineage.round == self.round:
                if m.decision == "admitted" or not m.resubmitted:
                    self.finished[m.lineage.assignment_id] = outcome_label(m)
            case DeadLetter(lineage=Lineage() as lin) if lin.round == self.round and subjects.on_admission_path(m.subject):
                self.finished.setdefault(lin.assignment_id, "dead_letter")

    def set_empty_pool(self) -> None:
        """With no parent in the pool the planner publishes nothing."""
        self.expected = 0

    @property
    def done(self) -> bool:
        return (
            self.expected is not None
            and len(self.groups) >= self.expected
            and len(self.started) >= sum(self.groups.values())
            and self.started <= set(self.finished)
        )


async def next_round(bus) -> int:
    """One past the highest round ever requested, so a new ``aes run`` never reuses
    (and has JetStream drop) an earlier round's idempotency keys."""
    reviews = await bus.history(subjects.POOL_REVIEW, PoolReview)
    plans = await bus.history(subjects.POOL_PLAN, PoolPlan)
    return max((r.round for r in [*reviews, *plans]), default=0) + 1


async def run_rounds(
    bus,
    pool_size: Callable[[], Awaitable[int]],
    *,
    rounds: int,
    fresh: int,
    review: bool,
    round_timeout: float,
    out: Callable[[str], None] = print,
    after_round: Callable[[int, BusFeed], Awaitable[None]] | None = None,
    observe: Callable[[Message], None] | None = None,
) -> list[RoundTracker]:
    """Request ``rounds`` rounds one after another and print their progress.

    Each round is a ``PoolPlan``, or (``review``) a ``PoolReview`` that reruns the solver
    on the pool first and then plans. A round ends when the tracker says so, or after ``round_timeout``
    seconds (reported, and the next round starts: its work stays on the bus); then
    ``after_round(round, feed)`` runs (the training phase), reading on from the same
    feed. ``observe`` sees every message of the rounds.
    """
    trackers = []
    async with BusFeed.open(bus) as feed:
        first = await next_round(bus)
        for r in range(first, first + rounds):
            tracker = RoundTracker(round=r)
            trackers.append(tracker)
            size = await pool_size()
            out(f"== round {r}: pool {size}, {fresh} new assignments" + (", reviewing the pool first" if review else ""))
            if size == 0:
                tracker.set_empty_pool()
                out("   the pool is empty: nothing to plan from (seed it with `aes pool seed`)")
                continue
            key = f"round:{r}"
            if review:
                await bus.publish(subjects.POOL_REVIEW, PoolReview(idempotency_key=key, episode_id=key, round=r, fresh=fresh))
            else:
                await bus.publish(subjects.POOL_PLAN, PoolPlan(idempotency_key=key, episode_id=key, round=r, fresh=fresh))
            loop = asyncio.get_running_loop()
            deadline = loop.time() + round_timeout
            while not tracker.done:
                if (got := await feed.next(deadline - loop.time())) is None:
                    pending = sorted(tracker.started - set(tracker.finished))
                    out(f"== round {r} timed out after {round_timeout:.0f}s; still running: {', '.join(pending) or '-'}")
                    break
                subject, m = got
                tracker.observe(m)
                if observe is not None:
                    observe(m)
                line = describe(subject, m)
                if line:
                    out(line)
            if tracker.done:
                out(f"== round {r} done: " + (", ".join(f"{a} {o}" for a, o in sorted(tracker.finished.items())) or "no assignments"))
            if after_round is not None:
                await after_round(r, feed)
    return trackers
