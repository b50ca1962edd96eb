"""Groups trajectories, drops groups without signal, and fills batches.

A group is complete when ``group_size`` of its members have ended: each solver
attempt ends its member; a proposer attempt ends with the episode whose candidate
was not sent back for revision (its earlier revisions join the group too). The
size comes with the samples (the wave or planner that issued the group knows it)
or, failing that, from the learner's setting for the role. Its
finished samples are centred and trained on; unfinished ones (``finished=False``,
e.g. an episode cut by a model error) are left out, and so are screened ones (forgery signs in
their trial, ``Sample.screened``) and those with a reward no verifier gives (``advantages.refusal``:
not finite or outside [0, 1]), both counted in ``Batch.screened`` and never trained on. A rollout id that arrives
again replaces its earlier version, so an in-progress trajectory published early
is superseded by its final one. Complete groups whose rewards vary join their
role's queue; the others are dropped (and counted), so the batcher keeps consuming
-- oversampling -- until a batch of ``groups_per_batch`` useful groups is full.
Samples of incomplete groups stay pending with their stored sampling log-probs
and carry over to later updates; a group still incomplete after
``max_pending_updates`` updates is evicted so that nothing waits forever. A group
holding a sample older than the allowed policy lag is dropped when a batch is cut.
"""

from __future__ import annotations

import logging
from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass

from aes_lib.learner.advantages import centred, has_signal, refusal
from aes_lib.learner.config import LearnerConfig
from aes_lib.learner.samples import Sample

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Group:
    """A complete group and the advantage of each of its samples."""

    group_id: str
    role: str
    samples: tuple[Sample, ...]
    advantages: tuple[float, ...]


@dataclass(frozen=True)
class Batch:
    """One update's worth of groups, all of one role."""

    role: str
    groups: tuple[Group, ...]
    dropped: int
    """Zero-variance groups discarded while this batch filled."""
    evicted: int
    """Incomplete groups given up on (older than ``max_pending_updates``) since the last batch."""
    carried_over: int
    """Samples still pending (incomplete groups, unfinished trajectories) after this batch was cut."""
    stale: int = 0
    """Complete groups dropped for holding samples older than the allowed policy lag."""
    screened: int = 0
    """Samples left out of complete groups for forgery signs or a refused reward since the last batch."""

    @property
    def samples(self) -> list[tuple[Sample, float]]:
        return [(s, a) for g in self.groups for s, a in zip(g.samples, g.advantages)]

    @property
    def mean_reward(self) -> float:
        rewards = [s.reward for g in self.groups for s in g.samples]
        return sum(rewards) / len(rewards)


class Batcher:
    def __init__(self, config: LearnerConfig) -> None:
        self._config = config
        self._pending: dict[str, OrderedDict[str, Sample]] = {}
        self._born: dict[str, int] = {}  # group id -> batches cut before its first sample arrived
        self._ready: dict[str, deque[Group]] = {"solver": deque(), "proposer": deque()}
        self._dropped: dict[str, int] = {"solver": 0, "proposer": 0}
        self._evicted = 0
        self._stale = 0
        self._screened: dict[str, int] = {"solver": 0, "proposer": 0}
        self._batches = 0
        self._seen_groups: set[str] = set()

    @property
    def pending(self) -> int:
        """Samples waiting for their group to complete."""
        return sum(len(g) for g in self._pending.values())

    def held(self) -> set[str]:
        """Rollout ids of every sample not yet trained, dropped or evicted (pending or queued)."""
        queued = {s.rollout_id for q in self._ready.values() for g in q for s in g.samples}
        return queued | {rid for g in self._pending.values() for rid in g}

    def add(self, sample: Sample) -> bool:
        """Take a sample; a redelivered rollout id replaces its earlier version. False when
        its group was already closed (trained, dropped or evicted): the sample is ignored."""
        if sample.role not in self._ready:
            raise ValueError(f"role must be solver or proposer, got {sample.role!r}")
        if sample.group_id in self._seen_groups:
            return False
        group = self._pending.setdefault(sample.group_id, OrderedDict())
        self._born.setdefault(sample.group_id, self._batches)
        group[sample.rollout_id] = sample
        size = sample.group_size or self._config.group_size(sample.role)
        if sum(s.final for s in group.values()) < size:
            return True
        self._close(sample.group_id)
        refused = {rid: why for rid, s in group.items() if (why := refusal(s.reward))}
        for rid, why in refused.items():
            log.warning("sample %s of group %s left out: %s", rid, sample.group_id, why)
        left_out = {rid for rid, s in group.items() if s.screened or rid in refused}
        finished = [s for rid, s in group.items() if s.finished and rid not in left_out]
        self._screened[sample.role] += len(left_out)
        rewards = [s.reward for s in finished]
        if has_signal(rewards):
            self._ready[sample.role].append(
                Group(sample.group_id, sample.role, tuple(finished), tuple(centred(rewards)))
            )
        else:
            self._dropped[sample.role] += 1
        return True

    def _close(self, group_id: str) -> None:
        del self._pending[group_id], self._born[group_id]
        self._seen_groups.add(group_id)

    def next_batch(self, min_version: int = 0) -> Batch | None:
        """A full batch (solver first), or None until enough useful groups arrived. Queued
        groups with a sample sampled before ``min_version`` are dropped as stale."""
        stale = 0
        for queue in self._ready.values():
            fresh = [g for g in queue if min(s.policy_version for s in g.samples) >= min_version]
            stale += len(queue) - len(fresh)
            queue.clear()
            queue.extend(fresh)
        self._stale += stale
        for role, queue in self._ready.items():
            n = self._config.batch_groups(role)
            if len(queue) >= n:
                groups = tuple(queue.popleft() for _ in range(n))
                self._batches += 1
                self._evict()
                dropped, self._dropped[role] = self._dropped[role], 0
                evicted, self._evicted = self._evicted, 0
                stale, self._stale = self._stale, 0
                screened, self._screened[role] = self._screened[role], 0
                return Batch(role, groups, dropped, evicted, self.pending, stale, screened)
        return None

    @classmethod
    def resume(cls, config: LearnerConfig, batches: int, closed: Iterable[str], samples: Iterable[Sample]) -> "Batcher":
        """A restarted orchestrator's batcher: ``batches`` cut so far, the groups the last one
        ``closed`` (a redelivered member of one is ignored), and the ``samples`` still held, in
        their arrival order (their groups' ages count from now: an eviction may come late)."""
        b = cls(config)
        b._batches = batches
        b._seen_groups |= set(closed)
        for s in samples:
            b.add(s)
        return b

    def _evict(self) -> None:
        limit = self._batches - self._config.max_pending_updates
        for gid in [g for g, born in self._born.items() if born < limit]:
            self._close(gid)
            self._evicted += 1
