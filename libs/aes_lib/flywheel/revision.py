"""Sending a failed candidate back to its proposer: whether, the evidence, and the Assignment.

Every check that fails a candidate (a gate, or calibration out of the band) sends it
back while its assignment has revisions left; the revision repeats the whole route.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import msgspec

from aes_proto.messages import Assignment, BlobRef, CandidateEnv, Direction, Lineage, Verdict

from aes_lib.flywheel.calibration import Decision
from aes_lib.text import truncate

MAX_EVIDENCE_CHARS = 4000
"""Characters of a failed check's evidence (a build log, a trial's output) a revision carries."""


def sends_back(lineage: Lineage, max_revisions: int) -> bool:
    """Whether a candidate that failed a check goes back to its proposer: it came from one
    (a seed has none) and its assignment has revisions left."""
    return lineage.mode != "seed" and lineage.revision < max_revisions


@dataclasses.dataclass(frozen=True)
class RolloutEvidence:
    """One solver rollout as the proposer will read it."""

    reward: float
    failure: str = ""
    """Short failure signature (first failing test, timeout, error); empty on success."""
    trajectory: BlobRef | None = None
    """The stored attempt, for an audit that reads it."""


@dataclasses.dataclass(frozen=True)
class AuditNote:
    """What an audit of a candidate below the band said (``aes_lib.review.audit``)."""

    label: str
    """``hard`` or ``defect``."""
    reason: str
    acts: bool
    """The label changed the revision (an enforced ``defect``); False: recorded only."""


def audited(decision: Decision, defect: bool) -> Decision:
    """A too-hard decision after an enforced audit: a defect goes back as a repair
    (direction ``revise``) and earns its proposer 0, as a broken task does."""
    if decision.outcome != "too_hard" or not defect:
        return decision
    return dataclasses.replace(decision, direction="revise", proposer_reward=0.0)


def feedback_text(
    decision: Decision,
    rollouts: Sequence[RolloutEvidence],
    diagnostic: RolloutEvidence | None,
    band: tuple[float, float],
    audit: AuditNote | None = None,
) -> str:
    """The evidence a revision starts from, as plain text for the proposer's prompt."""
    lo, hi = band
    rewards = ", ".join(f"{r.reward:.2f}" for r in rollouts)
    lines = [
        f"Calibration: {decision.outcome}. The solver's mean reward was {decision.mean:.2f} "
        f"(std {decision.std:.2f}) over {len(rollouts)} attempts [{rewards}]; "
        f"admission needs a mean in [{lo:.2f}, {hi:.2f}] and std >= the minimum.",
    ]
    if audit is not None and audit.label == "defect" and audit.acts:
        lines.append(f"An audit found the task broken, not hard: {audit.reason} "
                     "Repair what it names and keep the task's aim; do not just make it easier.")
    elif decision.outcome == "too_hard":
        lines.append("Make the task easier: fewer steps or a clearer instruction, keeping it verifiable.")
    elif decision.outcome == "too_easy":
        lines.append("Make the task harder: a longer horizon or an extra requirement the tests check.")
    elif decision.outcome == "unverified_too_hard":
        lines.append("The task has no reference solution and no attempt passed: nothing shows it can be solved.")
    else:
        lines.append("Attempts all scored alike: add tests that separate partial from full solutions.")
    if audit is not None and not audit.acts:
        lines.append(f"An audit labelled it {audit.label}: {audit.reason}")
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


def check_feedback(verdict: Verdict, evidence: str) -> str:
    """The evidence a revision after a failed gate starts from, as plain text for the proposer."""
    lines = [f"Check failed: {verdict.stage} ({verdict.reason}). {verdict.detail}".rstrip()]
    if evidence:
        lines += ["Evidence:", truncate(evidence, MAX_EVIDENCE_CHARS)]
    lines.append("Fix this and submit the whole task again: the revision goes through every check again.")
    return "\n".join(lines)


def revision_assignment(candidate: CandidateEnv, direction: Direction, feedback: str,
                        pass_rate: float | None = None) -> Assignment:
    """The Assignment that returns ``candidate`` to its proposer (revision + 1, same round)."""
    lineage = msgspec.structs.replace(candidate.lineage, revision=candidate.lineage.revision + 1,
                                      proposer_model="", cost_usd=0.0)
    return Assignment(
        idempotency_key=f"{lineage.assignment_id}:rev{lineage.revision}",
        episode_id=candidate.episode_id,
        lineage=lineage,
        direction=direction,
        pass_rate=pass_rate,
        feedback=feedback,
        previous_bundle=candidate.bundle,
        group_id=candidate.proposal.group_id if candidate.proposal else lineage.assignment_id,
        group_size=candidate.proposal.group_size if candidate.proposal else 1,
    )
