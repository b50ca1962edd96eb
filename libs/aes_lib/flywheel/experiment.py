"""The pools experiment's shape (``aes experiment pools``): which arms, how many seeds, the
rollout budget, and when and on what the held-out evaluation runs.

The solver, learner, training waves and flywheel are the run's own sections (``[training]``,
``[learner]``, ``[flywheel]``, ``[core]``): the same file with a real model and GPUs is the
full-scale recipe (docs/RECIPES.md).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from aes_lib.config import read_settings
from aes_lib.flywheel.controls import BUFFER_WEIGHT
from aes_lib.flywheel.readouts import ENDPOINTS

ARMS = ("static", "weighted", "oracle", "flywheel", "blind", "both")


class ExperimentConfigError(ValueError):
    """An experiment setting out of range."""


@dataclasses.dataclass(frozen=True)
class ExperimentConfig:
    """One experiment. Field ``x`` reads ``AES_EXPERIMENT_X``."""

    env_prefix: ClassVar[str] = "AES_EXPERIMENT_"
    section: ClassVar[str] = "experiment"
    families: str = "echo-words"
    """Task families the pools and the held-out set are drawn from, comma-separated."""
    max_difficulty: int = 4
    """Highest difficulty used of each family (0: the family's own maximum)."""
    arms: str = "static,flywheel"
    """Arms to run, comma-separated: ``static`` (a fixed pool, uniform over the difficulty
    range), ``weighted`` (the same pool, an environment whose last group had no reward spread
    sampled at ``buffer_weight``: prime-rl's buffer), ``oracle`` (no pool: each wave's
    environments fresh at the held-out frontier, the positive control), ``flywheel`` (procedural
    proposer, planner, calibration band, retirement), ``blind`` (the flywheel with each direction
    by a coin: no solver feedback) and ``both`` (the flywheel with the policy being trained as its
    proposer, ``parametric`` mode, trained on r_P too; needs ``AES_PROPOSALS_PER_ASSIGNMENT`` >= 2
    for proposer groups)."""
    seeds: int = 2
    """Independent runs of every arm (each from the same starting policy)."""
    waves: int = 6
    """Training waves per run: the rollout budget is waves x groups_per_wave x group_size."""
    waves_per_round: int = 2
    """Training waves between two flywheel rounds (review, retirement, new environments)."""
    eval_every: int = 2
    """Waves between held-out evaluations (also one before the first wave)."""
    heldout_per_difficulty: int = 2
    """Held-out instances of every family at every difficulty."""
    eval_k: int = 1
    """Attempts per held-out instance."""
    static_pool_size: int = 12
    """Instances in the static arm's pool."""
    start_per_family: int = 2
    """Instances of each family at its easiest that the flywheel starts from."""
    buffer_weight: float = BUFFER_WEIGHT
    """``weighted``: the sampling weight of an environment whose last training group had no
    reward spread, against 1 (``AES_TRAINING_BUFFER_WEIGHT`` in that arm)."""
    frontier_every: int = 2
    """``oracle``: waves between two readings of the frontier from the held-out set (a reading
    reuses the last evaluation where the weights are still the same)."""
    policy: str = "bootstrap"
    """The starting policy: ``bootstrap`` (a tiny model taught the families' easiest instances,
    ``aes_ops.bootstrap_policy``) or a transformers model folder."""
    bootstrap_steps: int = 600
    """Supervised steps of the bootstrap policy."""
    bootstrap_width: int = 128
    """Hidden size of the bootstrap policy (2 layers): at 64 it memorizes its examples' words
    instead of learning to copy them from the instruction."""
    bootstrap_examples: int = 512
    """Distinct instances the bootstrap is taught."""
    bootstrap_levels: int = 2
    """Difficulties the bootstrap sees, from each family's easiest: above them the policy
    starts near 0, so there is a step to climb."""
    bootstrap_near_miss: float = 0.0
    """Share of the bootstrap's examples answered with the family's near miss (``TaskSpec.near_miss``)
    instead of its reference solution: a start that holds a choice RL can settle."""
    round_timeout_s: float = 1800.0
    """How long a flywheel round may take before the run moves on (reported)."""
    endpoint: str = "final"
    """What the paired read-outs and the positive control's gate compare per run: ``final``, the
    held-out mean reward at the last point; ``curve``, its mean over every point after the start
    (the area under the learning curve, which tells a faster climb from a slower one where both
    arms end near the top). Read from the runs: changing it reuses every finished run."""

    def __post_init__(self) -> None:
        if not self.family_names():
            raise ExperimentConfigError("AES_EXPERIMENT_FAMILIES: no task family given")
        if bad := [a for a in self.arm_names() if a not in ARMS]:
            raise ExperimentConfigError(f"AES_EXPERIMENT_ARMS: unknown arm(s) {bad}; known: {', '.join(ARMS)}")
        if not self.arm_names():
            raise ExperimentConfigError("AES_EXPERIMENT_ARMS: no arm given")
        if min(self.seeds, self.waves, self.waves_per_round, self.eval_every, self.heldout_per_difficulty,
               self.eval_k, self.static_pool_size, self.start_per_family, self.frontier_every) < 1:
            raise ExperimentConfigError("seeds, waves, waves_per_round, eval_every, heldout_per_difficulty, "
                                        "eval_k, static_pool_size, start_per_family and frontier_every must be >= 1")
        if not 0.0 < self.buffer_weight <= 1.0:
            raise ExperimentConfigError(f"buffer_weight must be in (0, 1], got {self.buffer_weight}")
        if self.endpoint not in ENDPOINTS:
            raise ExperimentConfigError(f"AES_EXPERIMENT_ENDPOINT: expected one of {', '.join(ENDPOINTS)}, "
                                        f"got {self.endpoint!r}")
        if self.max_difficulty < 0 or self.bootstrap_steps < 0:
            raise ExperimentConfigError("max_difficulty and bootstrap_steps must be >= 0")
        if not 0.0 <= self.bootstrap_near_miss <= 1.0:
            raise ExperimentConfigError(f"bootstrap_near_miss must be in [0, 1], got {self.bootstrap_near_miss}")
        if min(self.bootstrap_width, self.bootstrap_examples, self.bootstrap_levels) < 1 or self.bootstrap_width % 4:
            raise ExperimentConfigError("bootstrap_examples and bootstrap_levels must be >= 1, bootstrap_width a "
                                        "positive multiple of 4 (its attention heads)")

    @classmethod
    def from_env(cls, **overrides: object) -> "ExperimentConfig":
        return cls(**{**read_settings(cls, ExperimentConfigError), **overrides})  # type: ignore[arg-type]

    def family_names(self) -> list[str]:
        return [n.strip() for n in self.families.split(",") if n.strip()]

    def arm_names(self) -> list[str]:
        return [a.strip() for a in self.arms.split(",") if a.strip()]
