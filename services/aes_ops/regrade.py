"""``aes regrade``: re-score stored attempts with the verifier in force, without the agent.

Every solver attempt's summary (``RolloutSummary``: calibration, pool review, training,
diagnostic) names its stored end state, the agent's result paths as the engine read them
(``aes_lib.sandbox.end_state``). Re-grading runs them through the current trust boundary and
tests (``aes_lib.sandbox.trial.regrade``) and compares:

- each attempt's reward, old and new;
- each decision that attempts made, the calibration that admitted a task or the pool review that
  kept it: whether the new rewards still make it (``Group``). A task admitted or kept under an
  older verifier that the new scores would reject is *flagged*.

``apply`` feeds the pool manager from the new scores: each active task's latest decision, re-made,
sets its mean; one no longer in the band is retired (``PoolEvent``) and the planner is asked for a
replacement (``PoolPlan``), as a pool review does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import math
from typing import Any
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

import msgspec

from aes_proto import subjects
from aes_proto.messages import BlobRef, CalibrationResult, PoolEvent, PoolPlan, RolloutSummary

from aes_lib.bundle import Task, unpack
from aes_lib.domains.kinds import DomainKinds
from aes_lib.flywheel.calibration import CalibrationRule
from aes_lib.runners.pool_store import PoolStore
from aes_lib.sandbox import ImageCache, TrialFault
from aes_lib.sandbox.end_state import EndStateError
from aes_lib.sandbox.trial import regrade as regrade_trial
from aes_ops.evaluation import summarize

DECISIONS = ("calibration", "pool_review")
"""The purposes whose attempts decide a task's place in the pool."""


@dataclasses.dataclass(frozen=True)
class Attempt:
    """One stored attempt and its new reward (None: not re-graded, ``why``)."""

    summary: RolloutSummary
    reward: float | None
    why: str = ""

    @property
    def moved(self) -> bool:
        return self.reward is not None and not math.isclose(self.reward, self.summary.reward, abs_tol=1e-9)


@dataclasses.dataclass(frozen=True)
class Group:
    """The attempts of one decision (a calibration or a pool review of one task), old and new."""

    env_id: str
    purpose: str
    episode_id: str
    old: tuple[float, ...]
    new: tuple[float, ...]
    """The new rewards; an attempt that was not re-graded keeps its old one (``complete``: none)."""
    complete: bool
    old_ok: bool
    new_ok: bool
    reason: str
    """Why the new rewards fail the decision ("" when they pass)."""

    @property
    def flagged(self) -> bool:
        """Admitted or kept on the old scores, and the new ones would not (only complete groups)."""
        return self.complete and self.old_ok and not self.new_ok

    @property
    def new_mean(self) -> float:
        return sum(self.new) / len(self.new)


@dataclasses.dataclass
class Report:
    attempts: list[Attempt]
    groups: list[Group]
    events: list[PoolEvent] = dataclasses.field(default_factory=list)
    """What ``apply`` published."""

    @property
    def moved(self) -> list[Attempt]:
        return [a for a in self.attempts if a.moved]

    @property
    def flagged(self) -> list[Group]:
        return [g for g in self.groups if g.flagged]


def verdict(rule: CalibrationRule, purpose: str, rewards: Iterable[float]) -> str:
    """Why ``rewards`` would not admit (calibration) or keep (pool review) a task; "" if they would."""
    r = list(rewards)
    mean = sum(r) / len(r)
    if mean < rule.band_low:
        return "too_hard"
    if mean > rule.band_high:
        return "too_easy"
    std = math.sqrt(sum((x - mean) ** 2 for x in r) / len(r))
    if purpose == "calibration" and std < rule.min_std:
        return "no_spread"
    return ""


class _Tasks:
    """Bundles unpacked once each, into a folder of this run's."""

    def __init__(self, blobs) -> None:
        self.blobs = blobs
        self.root = Path(tempfile.mkdtemp(prefix="aes-regrade-"))
        self._tasks: dict[str, asyncio.Task] = {}

    def get(self, bundle: BlobRef) -> asyncio.Task:
        if bundle.sha256 not in self._tasks:
            dest = self.root / bundle.sha256
            self._tasks[bundle.sha256] = asyncio.ensure_future(
                asyncio.to_thread(lambda: unpack(self.blobs.get_bytes(bundle), dest)))
        return self._tasks[bundle.sha256]

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


async def regrade(bus, pool: PoolStore, *, purposes: tuple[str, ...] = (), env_ids: tuple[str, ...] = (),
                  rule: CalibrationRule | None = None, jobs: int = 2, images: ImageCache | None = None,
                  progress: Callable[[str], None] | None = None) -> Report:
    """Re-score every stored attempt (of ``purposes`` and ``env_ids``; empty: all) and re-make
    the decisions they made under ``rule``."""
    rule = rule or CalibrationRule()
    summaries = list({s.rollout_id: s for s in await bus.history(subjects.ROLLOUT_SUMMARY, RolloutSummary)
                      if s.role == "solver" and (not purposes or s.purpose in purposes)
                      and (not env_ids or s.env_id in env_ids)}.values())
    bundles = {c.env_id: c.bundle for c in await bus.history(subjects.RESULT_CALIBRATION, CalibrationResult) if c.bundle}
    imported: set[str] = set()
    for env_id in {s.env_id for s in summaries}:
        if (entry := await pool.entry(env_id)) is not None:
            bundles[env_id] = entry.bundle
            if entry.source == "seed":
                imported.add(env_id)
    images = images or ImageCache(kinds=DomainKinds())
    seeds = ImageCache(images.client, images.max_build_timeout, kinds=images.kinds,
                       caps=dataclasses.replace(images.caps, allow_network=True))
    tasks, gate = _Tasks(bus.blobs), asyncio.Semaphore(jobs)

    async def one(s: RolloutSummary) -> Attempt:
        if s.end_state is None:
            return Attempt(s, None, "no stored end state")
        if (bundle := bundles.get(s.env_id)) is None:
            return Attempt(s, None, "its task's bundle is not known to the stack")
        async with gate:
            try:
                task: Task = await tasks.get(bundle)
                state = await asyncio.to_thread(bus.blobs.get_bytes, s.end_state)
                result = await regrade_trial(task, state, seeds if s.env_id in imported else images,
                                             labels={"aes.regrade": s.rollout_id[:60]})
            except (TrialFault, EndStateError, OSError, ValueError) as e:  # never a reward: not re-graded
                return Attempt(s, None, f"{type(e).__name__}: {e}")
        if progress:
            progress(f"{s.rollout_id}: {s.reward:g} -> {result.reward:g}")
        return Attempt(s, result.reward)

    try:
        attempts = list(await asyncio.gather(*(one(s) for s in summaries)))
    finally:
        tasks.close()
    return Report(attempts, groups(attempts, rule))


def groups(attempts: list[Attempt], rule: CalibrationRule) -> list[Group]:
    """The decisions among ``attempts``, each re-made on the new rewards, in stream order."""
    by: dict[tuple[str, str, str], list[Attempt]] = {}
    for a in attempts:
        s = a.summary
        if s.purpose in DECISIONS:
            by.setdefault((s.env_id, s.purpose, s.episode_id), []).append(a)
    out = []
    for (env_id, purpose, episode), members in by.items():
        old = tuple(a.summary.reward for a in members)
        new = tuple(a.summary.reward if a.reward is None else a.reward for a in members)
        why = verdict(rule, purpose, new)
        out.append(Group(env_id, purpose, episode, old, new, complete=all(a.reward is not None for a in members),
                         old_ok=not verdict(rule, purpose, old), new_ok=not why, reason=why))
    return out


async def apply(bus, pool: PoolStore, report: Report) -> list[PoolEvent]:
    """Each active task's latest complete decision, re-made: its new mean in the pool; retired
    (and a replacement planned) when the new rewards would not keep it."""
    latest: dict[str, Group] = {}
    for g in report.groups:
        if g.complete:
            latest[g.env_id] = g
    entries = await pool.active_entries()
    active, round_ = {e.env_id for e in entries}, max((e.round for e in entries), default=0)
    changed = {e: g for e, g in latest.items() if e in active and g.new != g.old}
    retire = [e for e, g in changed.items() if not g.new_ok]
    for env_id, g in changed.items():
        await pool.set_mean(env_id, g.new_mean)
    change = await pool.retire(retire)
    run = hashlib.sha256(repr(sorted((e, g.new) for e, g in changed.items())).encode()).hexdigest()[:12]
    events = []
    for env_id, g in changed.items():
        if env_id in retire:
            event = PoolEvent(idempotency_key=f"pool:{env_id}:retired", episode_id=f"regrade-{run}", env_id=env_id,
                              kind="retired", reason=f"regraded: {g.reason}", mean_reward=g.new_mean,
                              pool_size=change.size)
        else:
            event = PoolEvent(idempotency_key=f"pool:{env_id}:rescored:{run}", episode_id=f"regrade-{run}",
                              env_id=env_id, kind="rescored", reason="regraded", mean_reward=g.new_mean,
                              pool_size=change.size)
        await bus.publish(subjects.POOL_EVENT, event)
        events.append(event)
    if retire:
        await bus.publish(subjects.POOL_PLAN, PoolPlan(idempotency_key=f"regrade-{run}:plan", round=round_,
                                                       episode_id=f"regrade-{run}", retired=tuple(retire)))
    report.events = events
    return events


async def regrade_eval(result: dict[str, Any], blobs, *, jobs: int = 2, images: ImageCache | None = None,
                       progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """``aes eval``'s result (its JSON) re-scored from the attempts' stored end states, on the
    task folders it names: per task the old and new rewards (an attempt without an end state,
    or whose re-grading faulted, keeps its old one: ``partial``), and avg@k old and new."""
    images, gate = images or ImageCache(kinds=DomainKinds()), asyncio.Semaphore(jobs)

    async def one(task: Task, old: float, ref: dict | None) -> float | None:
        if ref is None:
            return None
        async with gate:
            try:
                state = await asyncio.to_thread(blobs.get_bytes, msgspec.convert(ref, BlobRef))
                new = (await regrade_trial(task, state, images)).reward
            except (TrialFault, EndStateError, OSError, ValueError, msgspec.ValidationError) as e:
                if progress:
                    progress(f"{task.name}: not re-graded: {type(e).__name__}: {e}")
                return None
        if progress:
            progress(f"{task.name}: {old:g} -> {new:g}")
        return new

    rows = []
    for t in result.get("tasks", []):
        if t.get("error") or not t.get("rewards"):
            continue
        task = await asyncio.to_thread(Task.load, t["path"])
        refs = t.get("end_states") or [None] * len(t["rewards"])
        new = await asyncio.gather(*(one(task, old, ref) for old, ref in zip(t["rewards"], refs)))
        rows.append({"name": t["name"], "old": t["rewards"], "partial": any(n is None for n in new),
                     "new": [o if n is None else n for o, n in zip(t["rewards"], new)]})
    return {"tasks": rows, "avg_old": summarize([r["old"] for r in rows]).avg,
            "avg_new": summarize([r["new"] for r in rows]).avg}
