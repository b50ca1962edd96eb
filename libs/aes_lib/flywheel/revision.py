"""Sending a calibrated-out candidate back to its proposer: the evidence and the Assignment."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import msgspec

from aes_proto.messages import Assignment, CandidateEnv

from aes_lib.flywheel.calibration import Decision


@dataclasses.dataclass(frozen=True)
class RolloutEvidence:
    """One solver rollout as the proposer will read it."""

    reward: float
    failure: str = ""
    """Short failure signature (first failing test, timeout, error); empty on success."""


def feedback_text(
    decision: Decision,
    rollouts: Sequence[RolloutEvidence],
    diagnostic: RolloutEvidence | None,
    band: tuple[float, float],
) -> str:
    """The evidence a revision starts from, as plain text for the proposer's prompt."""
    lo, hi = band
    rewards = ", ".join(f"{r.reward:.2f}" for r in rollouts)
    lines = [
        f"Calibration: {decision.outcome}. The solver's mean reward was {decision.mean:.2f} "
        f"(std {decision.std:.2f}) over {len(rollouts)} attempts [{rewards}]; "
        f"admission needs a mean in [{lo:.2f}, {hi:.2f}] and std >= the minimum.",
    ]
    if decision.outcome == "too_hard":
        lines.append("Make the task easier: fewer steps or a clearer instruction, keeping it verifiable.")
    elif decision.outcome == "too_easy":
        lines.append("Make the task harder: a longer horizon or an extra requirement the tests check.")
    else:
        lines.append("Attempts all scored alike: add tests that separate partial from full solutions.")
    failures = sorted({r.failure for r in rollouts if r.failure})
    if failures:
        lines.append("Failures seen: " + "; ".join(failures[:5]))
    if diagnostic is not None:
        lines.append(
            f"Diagnostic attempt with reference-solution hints scored {diagnostic.reward:.2f}"
            + (f" (failure: {diagnostic.failure})" if diagnostic.failure else "")
            + ("; the hints suffice, so spell out what the solution needs." if diagnostic.reward >= hi else
               "; even with hints the solver fails, so simplify the task itself.")
        )
    return "\n".join(lines)


def revision_assignment(candidate: CandidateEnv, decision: Decision, feedback: str) -> Assignment:
    """The Assignment that returns ``candidate`` to its proposer (revision + 1, same round)."""
    if not decision.resubmit or decision.direction is None:
        raise ValueError(f"decision {decision.outcome} does not send the candidate back")
    lineage = msgspec.structs.replace(candidate.lineage, revision=candidate.lineage.revision + 1,
                                      proposer_model="", cost_usd=0.0)
    return Assignment(
        idempotency_key=f"{lineage.assignment_id}:rev{lineage.revision}",
        episode_id=candidate.episode_id,
        lineage=lineage,
        direction=decision.direction,
        pass_rate=decision.mean,
        feedback=feedback,
        previous_bundle=candidate.bundle,
        group_id=candidate.proposal.group_id if candidate.proposal else lineage.assignment_id,
        group_size=candidate.proposal.group_size if candidate.proposal else 1,
    )
