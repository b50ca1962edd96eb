"""Planning assignments from the pool and the latest rollouts.

Per environment the planner keeps a window of the solver's latest rewards and a
count of failure signatures (``EnvStats``, folded from ``RolloutSummary``
messages). A plan picks parents so that categories with the fewest active
environments come first, and inside a category the parent whose pass rate is
farthest from the band centre (the clearest signal for "easier" or "harder").
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence

import msgspec

from aes_proto.messages import Assignment, GenerationMode, RolloutSummary

from aes_lib.flywheel.pool import PoolEntry

WINDOW = 32
"""Latest rewards kept per environment."""


class EnvStats(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """The solver's recent record on one environment."""

    env_id: str
    rewards: tuple[float, ...] = ()
    """Latest rewards, oldest first, at most ``WINDOW``."""
    failures: dict[str, int] = {}
    """Failure signature -> count over every recorded rollout."""
    rollout_ids: tuple[str, ...] = ()
    """Latest rollout ids, to ignore a redelivered summary."""

    @property
    def pass_rate(self) -> float | None:
        return sum(self.rewards) / len(self.rewards) if self.rewards else None

    @property
    def common_failure(self) -> str:
        if not self.failures:
            return ""
        # Most frequent; ties broken by text so the choice is deterministic.
        return min(self.failures.items(), key=lambda kv: (-kv[1], kv[0]))[0]


def record(stats: EnvStats | None, s: RolloutSummary) -> EnvStats:
    """Fold one solver rollout into its environment's stats (idempotent per rollout id)."""
    stats = stats or EnvStats(env_id=s.env_id)
    if s.rollout_id in stats.rollout_ids:
        return stats
    failures = dict(stats.failures)
    if s.failure:
        failures[s.failure] = failures.get(s.failure, 0) + 1
    return EnvStats(
        env_id=s.env_id,
        rewards=(stats.rewards + (s.reward,))[-WINDOW:],
        failures=failures,
        rollout_ids=(stats.rollout_ids + (s.rollout_id,))[-WINDOW:],
    )


@dataclasses.dataclass(frozen=True)
class Parent:
    """A pool environment as the planner sees it."""

    entry: PoolEntry
    pass_rate: float | None
    common_failure: str


def parents(entries: Sequence[PoolEntry], stats: dict[str, EnvStats]) -> list[Parent]:
    out = []
    for e in entries:
        st = stats.get(e.env_id)
        rate = st.pass_rate if st and st.pass_rate is not None else e.mean_reward
        out.append(Parent(e, rate, st.common_failure if st else ""))
    return out


def direction(pass_rate: float | None, centre: float = 0.5) -> str:
    """Solver keeps failing -> easier; succeeds -> harder; unknown -> a new variant."""
    if pass_rate is None:
        return "new"
    return "easier" if pass_rate < centre else "harder"


def choose(candidates: Sequence[Parent], count: int, centre: float = 0.5) -> list[Parent]:
    """``count`` parents, balancing categories; may reuse parents when the pool is small."""
    if count <= 0 or not candidates:
        return []
    by_cat: dict[str, list[Parent]] = {}
    for p in candidates:
        by_cat.setdefault(p.entry.category, []).append(p)
    for ps in by_cat.values():
        ps.sort(key=lambda p: (-abs((p.pass_rate if p.pass_rate is not None else centre) - centre), p.entry.env_id))
    load = Counter({c: len(ps) for c, ps in by_cat.items()})  # active envs + assignments so far
    used = Counter()
    chosen = []
    for _ in range(count):
        cat = min(by_cat, key=lambda c: (load[c], c))
        ps = by_cat[cat]
        p = ps[used[cat] % len(ps)]
        used[cat] += 1
        load[cat] += 1
        chosen.append(p)
    return chosen


def assignments(p: Parent, group_id: str, round_: int, mode: GenerationMode, centre: float = 0.5,
                attempts: int = 1) -> list[Assignment]:
    """``attempts`` parallel proposals for one slot (the proposer's training group);
    each id doubles as idempotency key and episode id."""
    if attempts == 1:
        return [assignment(p, group_id, round_, mode, centre)]
    return [assignment(p, f"{group_id}-a{k}", round_, mode, centre, group_id=group_id, group_size=attempts)
            for k in range(attempts)]


def assignment(p: Parent, assignment_id: str, round_: int, mode: GenerationMode, centre: float = 0.5,
               group_id: str = "", group_size: int = 1) -> Assignment:
    """One assignment; its id doubles as idempotency key and episode id."""
    return Assignment(
        idempotency_key=assignment_id,
        episode_id=assignment_id,
        assignment_id=assignment_id,
        direction=direction(p.pass_rate, centre),  # type: ignore[arg-type]
        parent_env_id=p.entry.env_id,
        parent_bundle=p.entry.bundle,
        category=p.entry.category,
        pass_rate=p.pass_rate,
        common_failure=p.common_failure,
        round=round_,
        mode=mode,
        group_id=group_id or assignment_id,
        group_size=group_size,
    )


def plan_round(
    active: Sequence[PoolEntry],
    retired: Sequence[PoolEntry],
    stats: dict[str, EnvStats],
    fresh: int,
    round_: int,
    mode: GenerationMode = "agent",
    centre: float = 0.5,
    attempts: int = 1,
) -> list[Assignment]:
    """One replacement per retired environment (it is the parent: retired as too easy
    means build a harder variant of it), then ``fresh`` assignments over the active pool
    (over the retired ones when the review emptied it), each as ``attempts`` parallel
    proposals. Ids depend only on the round and the inputs, so a replanned round
    repeats its keys."""
    out = [
        a for p in parents(retired, stats)
        for a in assignments(p, f"r{round_}-replace-{p.entry.env_id[:16]}", round_, mode, centre, attempts)
    ]
    for i, p in enumerate(choose(parents(active or retired, stats), fresh, centre)):
        out.extend(assignments(p, f"r{round_}-{i:03d}", round_, mode, centre, attempts))
    return out


def round_of(assignment_id: str) -> int | None:
    """The round encoded in a planner assignment id (``r<round>-...``); None for others."""
    head = assignment_id.split("-", 1)[0]
    return int(head[1:]) if head[:1] == "r" and head[1:].isdigit() else None
