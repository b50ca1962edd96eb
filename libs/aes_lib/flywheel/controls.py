"""How the pools experiment's control arms choose what to train on (issue 48), one rule each for
``aes experiment pools`` and the in-process harness (bench/gpu_pools_experiment.py):

- ``frontier``: the oracle's difficulty, the lowest the held-out set shows not yet mastered;
- ``buffer_weights`` and ``weighted_order``: the weighted arm's sampling, what taught nothing last
  time drawn less (prime-rl's buffer), without replacement;
- ``coin``: the blind arm's direction, with no solver feedback.

Standard library and the learner's ``has_signal`` only: the harness loads this without msgspec.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TypeVar

from aes_lib.learner.advantages import has_signal

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")

MASTERED = 0.9
"""The oracle's frontier is the lowest difficulty whose held-out mean reward is below this (the top
where none is); a frontier nearest 0.5 tied to mastered levels once the policy read 1.0 on the
first levels and 0 above, and trained where nothing varies (bench/results/ladder_pilot.md)."""
BUFFER_WEIGHT = 0.1
"""The weighted arm's sampling weight of what had no reward spread last time, against 1."""


def frontier(by_difficulty: Mapping[str, float], mastered: float = MASTERED) -> dict[str, int]:
    """Per family, the lowest difficulty whose held-out mean reward (``by_difficulty``:
    ``"<family>/d<difficulty>"`` -> mean) is below ``mastered``, its highest where none is."""
    levels: dict[str, list[tuple[int, float]]] = {}
    for key, rate in by_difficulty.items():
        family, d = key.rsplit("/d", 1)
        levels.setdefault(family, []).append((int(d), rate))
    return {family: next((d for d, rate in sorted(got) if rate < mastered), max(got)[0])
            for family, got in levels.items()}


def buffer_weights(last_groups: Mapping[K, Sequence[float]], weight: float) -> dict[K, float]:
    """Key -> ``weight`` for each whose latest group's rewards all passed or all failed (no
    ``has_signal``); the others, and those never tried (an empty group), weigh 1 and are left out."""
    return {key: weight for key, group in last_groups.items() if group and not has_signal(group)}


def weighted_order(items: Sequence[T], weight: Callable[[T], float], rng: random.Random) -> list[T]:
    """``items`` drawn one after another without replacement, each with chance in proportion to
    its ``weight`` (Efraimidis-Spirakis: a key u ** (1 / w) per item, u uniform from ``rng`` in
    ``items``' order, the largest first; ties keep that order)."""
    keys = [rng.random() ** (1.0 / weight(i)) for i in items]
    return [items[j] for j in sorted(range(len(items)), key=lambda j: -keys[j])]


def coin(rng: random.Random) -> str:
    """``easier`` or ``harder`` by a fair coin: the no-feedback ablation's direction."""
    return rng.choice(("easier", "harder"))
