"""The calibration rule: how many solver rollouts, admit or send back, proposer reward.

A candidate is admitted when the current solver's mean reward on it lies in the
band and the rewards vary enough to teach something. The rule is adaptive: 4
rollouts decide clear cases; a mean within ``edge_margin`` of a band edge asks
for 8, because 4 Bernoulli draws cannot tell 0.2 from 0.3 (see
``bench/calibration_bench.py`` for what this saves against a fixed 8).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Literal

Outcome = Literal["admitted", "too_hard", "too_easy", "no_spread", "unverified_too_hard"]

_EPS = 1e-9
"""Tolerance for comparisons of means that are sums of a few floats (0.1 + 0.2 ...)."""


class CalibrationRuleError(ValueError):
    """A rule configured with impossible numbers, or rewards outside [0, 1]."""


@dataclasses.dataclass(frozen=True)
class Decision:
    """What the rule concluded from a complete set of rollouts."""

    outcome: Outcome
    mean: float
    std: float
    """Population standard deviation of the rewards."""
    proposer_reward: float
    """1 admitted; partial (see ``CalibrationRule.partial_reward``) for valid but out of band."""
    resubmit: bool
    """True when the candidate goes back to its proposer for another revision."""
    direction: Literal["easier", "harder", "revise"] | None
    """What the revision should aim for; ``None`` when admitted."""
    diagnostic: bool
    """True when one diagnostic rollout with reference-solution hints should run first."""


@dataclasses.dataclass(frozen=True)
class CalibrationRule:
    """The admission band and rollout budget (SPEC.md, admission step 6)."""

    band_low: float = 0.25
    """Lowest admissible mean reward of the current solver."""
    band_high: float = 0.75
    """Highest admissible mean reward of the current solver."""
    min_std: float = 0.1
    """Smallest admissible reward standard deviation: below it every attempt looks alike."""
    initial_rollouts: int = 4
    """Rollouts run for every candidate."""
    expanded_rollouts: int = 8
    """Total rollouts when the initial mean is near a band edge."""
    edge_margin: float = 0.15
    """A mean this close to ``band_low`` or ``band_high`` triggers the expansion."""
    max_revisions: int = 2
    """Times one assignment may go back to its proposer after calibration fails."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.band_low < self.band_high <= 1.0:
            raise CalibrationRuleError(f"band must satisfy 0 <= low < high <= 1, got [{self.band_low}, {self.band_high}]")
        if not 1 <= self.initial_rollouts <= self.expanded_rollouts:
            raise CalibrationRuleError(
                f"need 1 <= initial_rollouts <= expanded_rollouts, got {self.initial_rollouts}, {self.expanded_rollouts}"
            )
        if self.min_std < 0 or self.edge_margin < 0 or self.max_revisions < 0:
            raise CalibrationRuleError("min_std, edge_margin and max_revisions must be >= 0")

    def near_edge(self, mean: float) -> bool:
        return min(abs(mean - self.band_low), abs(mean - self.band_high)) <= self.edge_margin + _EPS

    def rollouts_needed(self, rewards: Sequence[float]) -> int:
        """Total rollouts this candidate needs, given the rewards seen so far."""
        _check_rewards(rewards)
        if len(rewards) < self.initial_rollouts:
            return self.initial_rollouts
        if len(rewards) < self.expanded_rollouts and self.near_edge(_mean(rewards)):
            return self.expanded_rollouts
        return len(rewards)

    def partial_reward(self, mean: float) -> float:
        """Proposer reward for a valid environment outside the band (or without spread).

        0.5 just outside the band, falling linearly with the distance to the band
        to 0.25 at a mean of 0 or 1. A valid environment therefore always earns
        more than a broken one (0) and less than an admitted one (1), and a
        near miss earns more than a trivial or impossible task.
        """
        if mean < self.band_low:
            distance = (self.band_low - mean) / self.band_low if self.band_low > 0 else 0.0
        elif mean > self.band_high:
            distance = (mean - self.band_high) / (1.0 - self.band_high) if self.band_high < 1 else 0.0
        else:
            distance = 0.0
        return 0.5 - 0.25 * min(1.0, distance)

    def decide(self, rewards: Sequence[float], revision: int) -> Decision:
        """Decide on a complete set of rollouts (``rollouts_needed(rewards) == len(rewards)``)."""
        _check_rewards(rewards)
        if self.rollouts_needed(rewards) != len(rewards):
            raise CalibrationRuleError(
                f"decide() needs {self.rollouts_needed(rewards)} rollouts, got {len(rewards)}"
            )
        if revision < 0:
            raise CalibrationRuleError(f"revision must be >= 0, got {revision}")
        mean, std = _mean(rewards), _std(rewards)
        if mean < self.band_low - _EPS:
            outcome: Outcome = "too_hard"
        elif mean > self.band_high + _EPS:
            outcome = "too_easy"
        elif std < self.min_std - _EPS:
            outcome = "no_spread"
        else:
            outcome = "admitted"
        if outcome == "admitted":
            return Decision(outcome, mean, std, 1.0, resubmit=False, direction=None, diagnostic=False)
        resubmit = revision < self.max_revisions
        direction = {"too_hard": "easier", "too_easy": "harder", "no_spread": "revise"}[outcome]
        return Decision(
            outcome,
            mean,
            std,
            self.partial_reward(mean),
            resubmit=resubmit,
            direction=direction,  # type: ignore[arg-type]
            diagnostic=resubmit and outcome == "too_hard",
        )


    def decide_unverified(self, rewards: Sequence[float]) -> Decision:
        """Decide on a task without a reference solution (an imported one): the solver's
        attempts stand in for the oracle. If no attempt passes (scores 1.0, as the oracle
        must), nothing shows the task can be solved: ``unverified_too_hard``, out of the pool.
        If some pass, it is admitted like any seed task, whatever the band says (an imported
        task has no proposer to revise it)."""
        _check_rewards(rewards)
        if self.rollouts_needed(rewards) != len(rewards):
            raise CalibrationRuleError(
                f"decide_unverified() needs {self.rollouts_needed(rewards)} rollouts, got {len(rewards)}")
        mean, std = _mean(rewards), _std(rewards)
        if not any(r >= 1.0 - _EPS for r in rewards):
            return Decision("unverified_too_hard", mean, std, 0.0, resubmit=False, direction=None, diagnostic=False)
        return Decision("admitted", mean, std, 1.0, resubmit=False, direction=None, diagnostic=False)


def _check_rewards(rewards: Sequence[float]) -> None:
    for r in rewards:
        if not (0.0 <= r <= 1.0) or math.isnan(r):
            raise CalibrationRuleError(f"rewards must lie in [0, 1], got {r!r}")


def _mean(rewards: Sequence[float]) -> float:
    return sum(rewards) / len(rewards) if rewards else 0.0


def _std(rewards: Sequence[float]) -> float:
    if not rewards:
        return 0.0
    m = _mean(rewards)
    return math.sqrt(sum((r - m) ** 2 for r in rewards) / len(rewards))
