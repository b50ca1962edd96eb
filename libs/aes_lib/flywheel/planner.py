"""Planning assignments from the pool and the latest rollouts.

Per environment the planner-stats service keeps the solver's latest attempts and a
count of failure signatures (``aes_proto.records.EnvHistory``, folded from
``RolloutSummary`` messages by ``fold``). A plan picks parents so that categories with the fewest active
environments come first, and inside a category the parent whose pass rate is
farthest from the band centre (the clearest signal for "easier" or "harder"). ``blind`` plans
(``AES_PLANNER_DIRECTION=coin``) choose the same parents and toss a coin for the direction.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Sequence

from aes_proto.messages import Assignment, GenerationMode, Lineage, RolloutSummary
from aes_proto.records import EnvHistory, PoolEntry, RolloutRecord

from aes_lib.flywheel import controls

WINDOW = 32
"""Latest attempts kept per environment."""


def fold(history: EnvHistory | None, s: RolloutSummary) -> EnvHistory | None:
    """``history`` with one more solver attempt (None: nothing to record; the same history
    for a rollout already recorded, e.g. a redelivered summary)."""
    if s.role != "solver":
        return None
    history = history or EnvHistory(env_id=s.env_id)
    if any(r.rollout_id == s.rollout_id for r in history.recent):
        return history
    failures = dict(history.failures)
    if s.failure and s.purpose != "diagnostic":  # hinted attempts say nothing of the solver's own failures
        failures[s.failure] = failures.get(s.failure, 0) + 1
    record = RolloutRecord(rollout_id=s.rollout_id, reward=s.reward, failure=s.failure, solver=s.model,
                           trajectory=s.trajectory, purpose=s.purpose)
    return EnvHistory(env_id=s.env_id, recent=(history.recent + (record,))[-WINDOW:], failures=failures)


@dataclasses.dataclass(frozen=True)
class Parent:
    """A pool environment as the planner sees it."""

    entry: PoolEntry
    pass_rate: float | None
    common_failure: str


def parents(entries: Sequence[PoolEntry], stats: dict[str, EnvHistory]) -> list[Parent]:
    out = []
    for e in entries:
        st = stats.get(e.env_id)
        rate = st.pass_rate if st and st.pass_rate is not None else e.mean_reward
        out.append(Parent(e, rate, st.common_failure if st else ""))
    return out


def direction(pass_rate: float | None, centre: float = 0.5, coin: str = "") -> str:
    """Solver keeps failing -> easier; succeeds -> harder; unknown -> a new variant. ``coin`` (a
    seed): easier or harder by a fair coin seeded with it (``controls.coin``), whatever the pass
    rate (the no-feedback ablation)."""
    if coin:
        return controls.coin(random.Random(coin))
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
                attempts: int = 1, blind: bool = False) -> list[Assignment]:
    """``attempts`` parallel proposals for one slot (the proposer's training group);
    each id doubles as idempotency key and episode id."""
    if attempts == 1:
        return [assignment(p, group_id, round_, mode, centre, blind=blind)]
    return [assignment(p, f"{group_id}-a{k}", round_, mode, centre, group_id=group_id, group_size=attempts,
                       blind=blind) for k in range(attempts)]


def assignment(p: Parent, assignment_id: str, round_: int, mode: GenerationMode, centre: float = 0.5,
               group_id: str = "", group_size: int = 1, blind: bool = False) -> Assignment:
    """One assignment; its id doubles as idempotency key and episode id. ``blind``: the direction
    by a coin seeded with the group and the parent (a replanned round tosses the same; runs from
    other pools toss their own)."""
    coin = f"{group_id or assignment_id}/{p.entry.env_id}" if blind else ""
    return Assignment(
        idempotency_key=assignment_id,
        episode_id=assignment_id,
        lineage=Lineage(assignment_id=assignment_id, round=round_, parent_env_id=p.entry.env_id,
                        category=p.entry.category, domain=p.entry.domain, mode=mode),
        direction=direction(p.pass_rate, centre, coin),  # type: ignore[arg-type]
        parent_bundle=p.entry.bundle,
        pass_rate=p.pass_rate,
        common_failure=p.common_failure,
        group_id=group_id or assignment_id,
        group_size=group_size,
    )


def plan_round(
    active: Sequence[PoolEntry],
    retired: Sequence[PoolEntry],
    stats: dict[str, EnvHistory],
    fresh: int,
    round_: int,
    mode: GenerationMode = "agent",
    centre: float = 0.5,
    attempts: int = 1,
    blind: bool = False,
) -> list[Assignment]:
    """One replacement per retired environment (it is the parent: retired as too easy
    means build a harder variant of it), then ``fresh`` assignments over the active pool
    (over the retired ones when the review emptied it), each as ``attempts`` parallel
    proposals; ``blind``: each direction by a coin (``assignment``). Ids depend only on the
    round and the inputs, so a replanned round repeats its keys."""
    out = [
        a for p in parents(retired, stats)
        for a in assignments(p, f"r{round_}-replace-{p.entry.env_id[:16]}", round_, mode, centre, attempts, blind)
    ]
    for i, p in enumerate(choose(parents(active or retired, stats), fresh, centre)):
        out.extend(assignments(p, f"r{round_}-{i:03d}", round_, mode, centre, attempts, blind))
    return out

