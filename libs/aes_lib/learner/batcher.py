"""Groups trajectories, drops groups without signal, and fills batches.

A group is complete when ``group_size`` distinct rollouts of it arrived. Its
finished samples are centred and trained on; unfinished ones (``finished=False``,
e.g. an episode cut by a model error) are left out. A rollout id that arrives
again replaces its earlier version, so an in-progress trajectory published early
is superseded by its final one. Complete groups whose rewards vary join their
role's queue; the others are dropped (and counted), so the batcher keeps consuming
-- oversampling -- until a batch of ``groups_per_batch`` useful groups is full.
Samples of incomplete groups stay pending with their stored sampling log-probs
and carry over to later updates; a group still incomplete after
``max_pending_updates`` updates (e.g. a calibration group of 4-8 attempts) is
evicted so that nothing waits forever.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass

from aes_lib.learner.advantages import centred, has_signal
from aes_lib.learner.config import LearnerConfig
from aes_lib.learner.samples import Sample


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
        self._batches = 0
        self._seen_groups: set[str] = set()

    @property
    def pending(self) -> int:
        """Samples waiting for their group to complete."""
        return sum(len(g) for g in self._pending.values())

    def add(self, sample: Sample) -> None:
        """Take a sample; a redelivered rollout id replaces its earlier version."""
        if sample.role not in self._ready:
            raise ValueError(f"role must be solver or proposer, got {sample.role!r}")
        if sample.group_id in self._seen_groups:
            return  # a late member of a group already trained, dropped or evicted
        group = self._pending.setdefault(sample.group_id, OrderedDict())
        self._born.setdefault(sample.group_id, self._batches)
        group[sample.rollout_id] = sample
        if len(group) < self._config.group_size(sample.role):
            return
        self._close(sample.group_id)
        finished = [s for s in group.values() if s.finished]
        rewards = [s.reward for s in finished]
        if has_signal(rewards):
            self._ready[sample.role].append(
                Group(sample.group_id, sample.role, tuple(finished), tuple(centred(rewards)))
            )
        else:
            self._dropped[sample.role] += 1

    def _close(self, group_id: str) -> None:
        del self._pending[group_id], self._born[group_id]
        self._seen_groups.add(group_id)

    def next_batch(self) -> Batch | None:
        """A full batch (solver first), or None until enough useful groups arrived."""
        for role, queue in self._ready.items():
            n = self._config.batch_groups(role)
            if len(queue) >= n:
                groups = tuple(queue.popleft() for _ in range(n))
                self._batches += 1
                self._evict()
                dropped, self._dropped[role] = self._dropped[role], 0
                evicted, self._evicted = self._evicted, 0
                return Batch(role, groups, dropped, evicted, self.pending)
        return None

    def _evict(self) -> None:
        limit = self._batches - self._config.max_pending_updates
        for gid in [g for g, born in self._born.items() if born < limit]:
            self._close(gid)
            self._evicted += 1
