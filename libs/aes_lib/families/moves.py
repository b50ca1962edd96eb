"""The planner's assignment as a change of parameters: harder is up, easier down, by one step, or
by two from a parent whose latest attempts all passed or all failed."""

from __future__ import annotations

from aes_lib.families.base import Family, Params

STEP = {"harder": 1, "easier": -1}
"""Difficulty change per direction; ``new`` and ``revise`` keep the difficulty (a fresh seed)."""
FAR = 2
"""The step's multiple from a parent with no spread (pass rate 0 or 1): its rate says only that the
band lies beyond it, and a pass rate that falls off as a product of steps (the ladder's about
2^-(d - frontier)) puts one step from a mastered parent at a level that is mastered too."""


def moved(family: Family, params: Params, direction: str, seed: int, pass_rate: float | None = None) -> Params:
    """The child of ``params`` for ``direction`` and the parent's ``pass_rate``, clamped to the
    family's range, with ``seed``."""
    family.check(params)
    far = FAR if pass_rate in (0.0, 1.0) else 1
    difficulty = params.difficulty + far * STEP.get(direction, 0)
    return family.check(Params(min(max(difficulty, family.min_difficulty), family.max_difficulty), seed))
