"""What an arm of the pools experiment spends per unit of learning signal (issue 37).

Read from what the services already publish: every solver attempt's ``RolloutSummary``
(purpose, wall seconds in its container, the tokens its model sampled), every
``ValidationResult`` (the validator's container seconds) and every ``CalibrationResult``
(the tokens of the proposer episode behind it; none for the procedural proposer). Held-out evaluation is the
experiment's measurement, not the arm's spending, and is left out.

Two units: an **admitted task** (what choosing environments costs: the selection rollouts,
validations and proposer calls) and a **signal group** (a training group whose rewards differ,
so its advantages are not all zero: what all of the arm's rollouts, training and selection,
bought in learning signal).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from aes_proto.messages import CalibrationResult, RolloutSummary, ValidationResult

MEASURES = ("rollouts", "container_s", "tokens")


@dataclasses.dataclass
class Spend:
    rollouts: int = 0
    container_s: float = 0.0
    """Seconds of container wall time (solver attempts and validations)."""
    tokens: int = 0
    """Tokens sampled by every model call (completions; prompts are not counted)."""

    def add(self, other: "Spend") -> "Spend":
        return Spend(self.rollouts + other.rollouts, self.container_s + other.container_s, self.tokens + other.tokens)


@dataclasses.dataclass
class Cost:
    """One run's spending, split by what it was for."""

    training: Spend = dataclasses.field(default_factory=Spend)
    selection: Spend = dataclasses.field(default_factory=Spend)
    """Calibration and pool-review attempts, validations, proposer calls."""

    @classmethod
    def of(cls, summaries: Iterable[RolloutSummary], validations: Iterable[ValidationResult],
           outcomes: Iterable[CalibrationResult]) -> "Cost":
        cost = cls()
        for s in summaries:
            if s.role != "solver":
                continue
            part = cost.training if s.purpose == "training" else cost.selection
            part.rollouts += 1
            part.container_s += s.seconds
            part.tokens += s.completion_tokens
        for v in validations:
            cost.selection.container_s += v.seconds
        for o in outcomes:
            if o.proposal is not None:
                cost.selection.tokens += o.proposal.n_tokens
        return cost


def per_unit(costs: Sequence[Cost], admitted: int, signal_groups: int) -> dict[str, dict[str, float | None]]:
    """Pooled over runs: selection spending per admitted task, all spending per signal group
    (None where the arm has no such unit)."""
    selection = total = Spend()
    for c in costs:
        selection, total = selection.add(c.selection), total.add(c.selection).add(c.training)

    def ratio(spend: Spend, n: int) -> dict[str, float | None]:
        return {m: (getattr(spend, m) / n if n else None) for m in MEASURES}

    return {"per_admitted_task": ratio(selection, admitted), "per_signal_group": ratio(total, signal_groups)}
