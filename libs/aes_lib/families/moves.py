"""The planner's assignment as a change of parameters: harder is one step up, easier one down."""

from __future__ import annotations

from aes_lib.families.base import Family, Params

STEP = {"harder": 1, "easier": -1}
"""Difficulty change per direction; ``new`` and ``revise`` keep the difficulty (a fresh seed)."""


def moved(family: Family, params: Params, direction: str, seed: int) -> Params:
    """The child of ``params`` for ``direction``, clamped to the family's range, with ``seed``."""
    family.check(params)
    difficulty = params.difficulty + STEP.get(direction, 0)
    return family.check(Params(min(max(difficulty, family.min_difficulty), family.max_difficulty), seed))
