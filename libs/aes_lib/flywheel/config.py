"""Flywheel settings, from ``AES_*`` environment variables like ``aes_lib.config.Settings``."""

from __future__ import annotations

import dataclasses
from typing import ClassVar, get_args

from aes_proto.messages import ProposerMode

from aes_lib.config import read_settings
from aes_lib.tools import AGENT_PROTOCOLS
from aes_lib.flywheel.calibration import CalibrationRule


PLANNER_DIRECTIONS = ("pass_rate", "coin")


class FlywheelConfigError(ValueError):
    """A flywheel setting with a malformed or impossible value."""


@dataclasses.dataclass(frozen=True)
class FlywheelConfig:
    """Pool size, review cadence and round shape. Field ``x`` reads ``AES_X``."""

    env_prefix: ClassVar[str] = "AES_"
    section: ClassVar[str] = "flywheel"
    pool_capacity: int = 256
    """Active environments kept in the pool."""
    review_every: int = 16
    """Solver updates (PolicyVersion messages) between pool reviews."""
    assignments_per_round: int = 4
    """Fresh assignments the planner publishes per round, besides replacements."""
    solver_max_turns: int = 8
    """Turns one solver rollout may take."""
    solver_max_tokens: int = 384
    """Completion tokens per solver turn in calibration and pool reviews (a model that never stops
    writes this many every turn)."""
    solver_history_turns: int = 6
    """Past exchanges re-sent to the solver each turn in calibration and pool reviews; 0: all, as
    far as ``solver_context_tokens`` allows."""
    solver_context_tokens: int = 8192
    """The solver model's context window there: the history is cut to fit it."""
    band_low: float = 0.25
    """Lower edge of the calibration band."""
    band_high: float = 0.75
    """Upper edge of the calibration band."""
    max_revisions: int = 2
    """Revisions per assignment after a failed calibration."""
    proposals_per_assignment: int = 2
    """Parallel proposer attempts at each assignment; they form the proposer's training group,
    centred together (the paper uses 128)."""
    agent_protocol: str = "fenced"
    """How the shared policy acts in its agent episodes (solver and proposer): ``fenced`` shell
    commands or native ``tools`` calls (OpenAI ``tools``; on vLLM it needs a tool-call parser,
    e.g. ``AES_VLLM_ARGS="--enable-auto-tool-choice --tool-call-parser hermes"``)."""
    generation_mode: str = "agent"
    """How proposers build environments: ``agent``, ``prompt``, ``feedback``, ``procedural`` (task families'
    instances, no model; the pool must hold family instances, e.g. from ``aes_lib.families``) or
    ``parametric`` (the same, the proposer's model choosing the difficulty)."""
    planner_direction: str = "pass_rate"
    """How the planner sets each assignment's direction: ``pass_rate`` (easier where the solver
    fails the parent, harder where it passes) or ``coin`` (easier or harder at random: the
    pools experiment's ``blind`` arm, the flywheel without solver feedback; revisions still
    follow the calibration)."""

    @classmethod
    def from_env(cls, **overrides: object) -> "FlywheelConfig":
        return cls(**{**read_settings(cls, FlywheelConfigError), **overrides})  # type: ignore[arg-type]

    def __post_init__(self) -> None:
        if self.generation_mode not in (modes := get_args(ProposerMode)):
            raise FlywheelConfigError(f"AES_GENERATION_MODE: expected one of {modes}, got {self.generation_mode!r}")
        if self.agent_protocol not in AGENT_PROTOCOLS:
            raise FlywheelConfigError(f"AES_AGENT_PROTOCOL: expected one of {AGENT_PROTOCOLS}, got {self.agent_protocol!r}")
        if self.planner_direction not in PLANNER_DIRECTIONS:
            raise FlywheelConfigError(f"AES_PLANNER_DIRECTION: expected one of {PLANNER_DIRECTIONS}, "
                                      f"got {self.planner_direction!r}")
        if min(self.pool_capacity, self.review_every, self.proposals_per_assignment, self.solver_max_tokens) < 1 \
                or min(self.assignments_per_round, self.solver_history_turns, self.solver_context_tokens) < 0:
            raise FlywheelConfigError("pool_capacity, review_every, proposals_per_assignment and solver_max_tokens "
                                      "must be >= 1, assignments_per_round, solver_history_turns and "
                                      "solver_context_tokens >= 0")

    @property
    def rule(self) -> CalibrationRule:
        return CalibrationRule(band_low=self.band_low, band_high=self.band_high, max_revisions=self.max_revisions)
