"""Driving training waves from outside the services, and reporting what the learner did.

``train`` requests waves one after another. Synchronously (``policy_lag`` 0) a wave is
over when all its attempts were published, the learner has consumed every trajectory
on the bus, and -- if that produced a new version -- the engine serves it, so the next
wave samples the new weights; overlapped (``policy_lag`` L > 0) the next wave starts
once the attempts are in, while the learner trains, within L versions. Each wave
prints one line; ``LearnerTally`` sums a round's updates.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Awaitable, Callable

from nats.js.errors import NotFoundError

from aes_proto import subjects
from aes_proto.messages import LearnerStats, PolicyVersion, RolloutSummary, ServingUpdate, TrainingWave, TrajectoryRef

from aes_lib.bus import stream_for
from aes_ops.rounds import BusFeed
from aes_lib.flywheel.training import TrainingConfig

LEARNERS = {"orchestrator": subjects.TRAJECTORIES, "orchestrator-solver": subjects.TRAJECTORIES,
            "orchestrator-proposer": subjects.TRAJECTORIES, "learner": subjects.train_batch("shared"),
            "learner-solver": subjects.train_batch("solver"), "learner-proposer": subjects.train_batch("proposer")}
"""Durable names of the training consumers (shared, or one pair per role), orchestrators first (a
batch is on the bus before the orchestrator acks what made it), and the subject each consumes."""


@dataclasses.dataclass
class LearnerTally:
    """What the learner did while a round ran: the numbers ``aes run`` prints per round."""

    updates: int = 0
    version: int = 0
    """Latest version published (0: none)."""
    served: int = 0
    """Latest version an engine reported serving."""
    rewards: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    """Role -> mean batch reward of each update."""
    samples: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    """Role -> reward of each sample that reached the learner (solver attempts, proposer r_P)."""
    tokens: int = 0
    masked: int = 0

    def observe(self, m) -> None:
        match m:
            case LearnerStats():
                self.updates += 1
                self.version = max(self.version, m.policy_version)
                self.rewards.setdefault(m.role, []).append(m.mean_reward)
                self.tokens += m.tokens
                self.masked += m.masked_tokens
            case PolicyVersion():
                self.version = max(self.version, m.version)
            case ServingUpdate():
                self.served = max(self.served, m.version)
            case TrajectoryRef():
                self.samples.setdefault(m.role, []).append(m.reward)

    def reset(self) -> None:
        """Count afresh (the next round)."""
        for f in dataclasses.fields(self):
            setattr(self, f.name, f.default_factory() if f.default is dataclasses.MISSING else f.default)

    def line(self) -> str:
        def means(by_role: dict[str, list[float]]) -> str:
            return ", ".join(f"{role} {sum(r) / len(r):.3f} (n={len(r)})" for role, r in sorted(by_role.items())) or "-"

        mask = f"{self.masked / self.tokens:.1%}" if self.tokens else "-"
        return (f"learner: policy v{self.version} (served v{self.served}), {self.updates} updates; mean training "
                f"reward per role: {means(self.samples)}; masked tokens {mask}")


async def learner_idle(js) -> bool:
    """Whether every orchestrator and learner consumer has settled every message on the bus."""
    for name, subject in LEARNERS.items():
        try:
            info = await js.consumer_info(stream_for(subject), name)
        except NotFoundError:
            continue
        if info.num_pending or info.num_ack_pending:
            return False
    return True


@dataclasses.dataclass
class _Wave:
    """One requested wave and what came back of it."""

    wave_id: str
    deadline: float
    rewards: list[float] = dataclasses.field(default_factory=list)
    refs: int = 0
    published: int = 0
    """Latest policy version when it was requested."""

    def attempts_done(self, expected: int) -> bool:
        return len(self.rewards) >= expected and self.refs >= expected


async def _settled(bus, tally: LearnerTally) -> bool:
    """The learner consumed everything on the bus and the engine serves what it published."""
    return await learner_idle(bus.js) and tally.served >= tally.version


async def train(
    bus,
    config: TrainingConfig,
    *,
    round_: int,
    prefix: str,
    served_version: Callable[[], Awaitable[int]],
    out: Callable[[str], None] = print,
    tally: LearnerTally | None = None,
    feed: BusFeed | None = None,
) -> LearnerTally:
    """Run ``config.waves_per_round`` waves of round ``round_``; wave ids are ``<prefix>w<i>``
    (unique per request: rollout ids derive from them). ``feed``: the rounds' feed, read
    on (what the round's last results caused is counted too); else one of its own.

    ``config.policy_lag`` bounds how far sampling may run ahead of training. 0: a wave starts once the previous wave's attempts are trained on and the engine
    serves the result (sample, update, load, sample: the engine idles while the learner trains).
    L > 0: the next wave also starts as soon as the previous wave's attempts are in and the engine
    serves a version at most L - 1 behind the learner's, so that with the update still in flight
    its samples are at most L versions old when trained on; the learner drops (and counts, in
    ``LearnerStats.stale_dropped``) any sample older than that. The round ends settled either way.
    Returns what the learner did."""
    tally = tally or LearnerTally()
    loop = asyncio.get_running_loop()
    expected = config.groups_per_wave * config.group_size
    async with contextlib.AsyncExitStack() as stack:
        feed = feed or await stack.enter_async_context(BusFeed.open(bus))
        waves: dict[str, _Wave] = {}
        last: _Wave | None = None
        quiet = False
        while True:
            if last is None or last.attempts_done(expected) or loop.time() > last.deadline:
                more = len(waves) < config.waves_per_round
                lag = config.policy_lag
                ahead = (more and last is not None and last.attempts_done(expected) and lag > 0
                         and tally.served >= tally.version + 1 - lag)
                if last is None or ahead or (quiet and await _settled(bus, tally)) or loop.time() > last.deadline:
                    if last is not None:
                        _close(last, expected, tally, out, config)
                    if not more:
                        break
                    last = await _request(bus, config, f"{prefix}w{len(waves)}", round_, served_version, out, tally)
                    last.deadline = loop.time() + config.engine_wait_s
                    waves[last.wave_id] = last
                    quiet = False
                    continue
            got = await feed.next(1.0)
            # Settled only once the feed was quiet for a read: the learner may have acked its
            # last sample while its LearnerStats and PolicyVersion are still on their way to us.
            quiet = got is None
            if got is None:
                continue
            m = got[1]
            tally.observe(m)
            match m:
                case RolloutSummary(purpose="training") if m.episode_id in waves:
                    waves[m.episode_id].rewards.append(m.reward)
                    out(f"    attempt on {m.env_id[:12]}: reward {m.reward:.2f} (v{m.policy_version})")
                case TrajectoryRef() if m.episode_id in waves:
                    waves[m.episode_id].refs += 1
                case LearnerStats():
                    out(f"    update -> v{m.policy_version} ({m.role}): loss {m.loss:.4f}, "
                        f"reward {m.mean_reward:.3f}, masked {m.mask_fraction:.1%}, {m.seconds:.1f} s"
                        + (f", {m.stale_dropped} stale samples dropped" if m.stale_dropped else "")
                        + (f", {m.screened} screened out for forgery signs" if m.screened else ""))
                case ServingUpdate():
                    out(f"    engine serves v{m.version} (loaded in {m.seconds:.1f} s)")
    return tally


async def _request(bus, config: TrainingConfig, wave_id: str, round_: int,
                   served_version: Callable[[], Awaitable[int]], out: Callable[[str], None],
                   tally: LearnerTally) -> _Wave:
    version = await served_version()
    await bus.publish(subjects.TRAINING_WAVE, TrainingWave(
        idempotency_key=wave_id, episode_id=wave_id, wave_id=wave_id, groups=config.groups_per_wave,
        group_size=config.group_size, policy_version=version, round=round_))
    out(f"== training wave {wave_id}: {config.groups_per_wave} environments x {config.group_size} "
        f"attempts at policy v{version}")
    return _Wave(wave_id, 0.0, published=tally.version)


def _close(wave: _Wave, expected: int, tally: LearnerTally, out: Callable[[str], None], config: TrainingConfig) -> None:
    if not wave.attempts_done(expected):
        out(f"== wave {wave.wave_id}: gave up waiting after {config.engine_wait_s:.0f} s "
            f"({len(wave.rewards)}/{expected} attempts, policy v{tally.version}, served v{tally.served})")
        return
    mean = sum(wave.rewards) / len(wave.rewards) if wave.rewards else 0.0
    change = (f"new policy v{tally.version}" if tally.version > wave.published
              else "no update yet (the batch is not full, or the update is still training)")
    out(f"== wave {wave.wave_id} done: mean reward {mean:.3f}; {change}")
