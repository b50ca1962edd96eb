"""The pools experiment's arms and measures (issue 29): what a static pool and the flywheel
start from, the held-out set both are scored on, and the share of groups that teach.

- ``static_pool``: the fixed arm, instances drawn uniformly over the families' difficulty
  ranges (a programmatic pool like the paper's Tmax baselines).
- ``flywheel_start``: the adaptive arm's start, each family at its easiest; the procedural
  proposer (``AES_GENERATION_MODE=procedural``) moves it up and down from there.
- ``at_frontier``: the oracle arm's choice, fresh instances at the lowest difficulty the
  held-out set shows not yet mastered (``aes_lib.flywheel.controls.frontier``).
- ``heldout``: fixed instances per family and difficulty, seeds in their own range, so the
  evaluation set never meets a pool the arms are built from (``disjoint`` checks it).
- ``write_instances``: instances as a dataset folder (one task folder each), what
  ``seeding.seed_pool`` admits and ``aes eval`` scores.
- ``signal_fraction``: the share of solver groups with a reward spread (the learner's rule,
  ``has_signal``), with its Wilson interval: the mechanism the experiment is about.

``aes_ops.experiment`` runs the arms through the services under one rollout budget.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from pathlib import Path

from aes_lib import families
from aes_lib.families import Instance, Params
from aes_lib.flywheel.status import wilson
from aes_lib.learner.advantages import has_signal

HELDOUT_SEEDS = 1 << 40
"""Held-out instances' seeds start here; pool seeds stay below it."""
POOL_SEEDS = 1 << 31


def _families(names: Sequence[str]) -> list[families.Family]:
    if not names:
        raise ValueError("no task families given")
    return [families.get(n) for n in names]


def top(f: families.Family, max_difficulty: int = 0) -> int:
    """The family's highest difficulty, capped at ``max_difficulty`` (0: no cap)."""
    return min(f.max_difficulty, max_difficulty) if max_difficulty else f.max_difficulty


def static_pool(names: Sequence[str], size: int, seed: int = 0, max_difficulty: int = 0) -> list[Instance]:
    """``size`` distinct instances, each a family drawn uniformly, then a difficulty uniformly
    over its range (up to ``max_difficulty``, 0: all of it); the same arguments give the same pool."""
    fams = _families(names)
    if size < 1:
        raise ValueError(f"pool size must be >= 1, got {size}")
    rng = random.Random(f"static-pool/{seed}")
    out: dict[Instance, None] = {}
    while len(out) < size:
        f = rng.choice(fams)
        out[Instance(f.name, Params(rng.randint(f.min_difficulty, top(f, max_difficulty)), rng.randrange(POOL_SEEDS)))] = None
    return list(out)


def flywheel_start(names: Sequence[str], per_family: int, seed: int = 0) -> list[Instance]:
    """``per_family`` instances of each family at its easiest difficulty."""
    if per_family < 1:
        raise ValueError(f"per_family must be >= 1, got {per_family}")
    rng = random.Random(f"flywheel-start/{seed}")
    seeds = rng.sample(range(POOL_SEEDS), per_family * len(names))
    return [Instance(f.name, Params(f.min_difficulty, seeds.pop()))
            for f in _families(names) for _ in range(per_family)]


def at_frontier(at: Mapping[str, int], n: int, rng: random.Random) -> list[Instance]:
    """``n`` fresh instances at each family's difficulty in ``at`` (``controls.frontier``'s), the
    families in turn, seeds from ``rng`` in the pools' range (none where ``at`` is empty)."""
    names = list(at)
    turns = [names[i % len(names)] for i in range(n)] if names else []
    return [Instance(f, Params(at[f], rng.randrange(POOL_SEEDS))) for f in turns]


def heldout(names: Sequence[str], per_difficulty: int, max_difficulty: int = 0) -> list[Instance]:
    """``per_difficulty`` fixed instances of every difficulty (up to ``max_difficulty``, 0: all)
    of every family."""
    if per_difficulty < 1:
        raise ValueError(f"per_difficulty must be >= 1, got {per_difficulty}")
    return [Instance(f.name, Params(d, HELDOUT_SEEDS + i)) for f in _families(names)
            for d in range(f.min_difficulty, top(f, max_difficulty) + 1) for i in range(per_difficulty)]


def disjoint(pool: Sequence[Instance], held: Sequence[Instance]) -> None:
    """ValueError naming an instance in both (the same family and parameters are the same task)."""
    if shared := set(pool) & set(held):
        raise ValueError(f"{len(shared)} held-out instance(s) are in the pool, e.g. {min(shared, key=str)}")


def folder_name(i: Instance) -> str:
    return f"{i.family}-d{i.params.difficulty}-s{i.params.seed}"


def write_instances(instances: Sequence[Instance], dest: Path) -> list[Path]:
    """Each instance as ``dest/<family>-d<difficulty>-s<seed>``; a dataset folder."""
    dest.mkdir(parents=True, exist_ok=True)
    return [families.write_instance(families.get(i.family), i.params, dest / folder_name(i)) for i in instances]


def signal_fraction(groups: Mapping[str, Sequence[float]]) -> tuple[float, tuple[float, float], int]:
    """Of the solver groups (rewards by group id), the share with a reward spread, its 95%
    Wilson interval, and the number of groups."""
    n = len(groups)
    k = sum(1 for rewards in groups.values() if has_signal(rewards))
    return (k / n if n else 0.0), wilson(k, n), n
