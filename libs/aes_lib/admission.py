"""The admission routing slip: a stage passes a candidate on, or rejects it for good.

``CandidateEnv.route`` lists the stages still to pass, the current one first.
``forward`` pops the current stage, appends its verdict and publishes to the
next; ``reject`` ends the candidate's trip with a ``CalibrationResult`` so the
pool, planner and status see every outcome. Both derive the idempotency key from
the candidate's, so a redelivered candidate republishes the same key.
"""

from __future__ import annotations

import msgspec

from aes_proto import subjects
from aes_proto.messages import CalibrationResult, CandidateEnv, Verdict

from aes_lib.service import Context


class RouteError(ValueError):
    """The verdict's stage is not the one at the head of the candidate's route."""


def _check_head(candidate: CandidateEnv, verdict: Verdict) -> None:
    if not candidate.route or candidate.route[0] != verdict.stage:
        raise RouteError(
            f"stage {verdict.stage!r} is not at the head of candidate {candidate.env_id}'s route {candidate.route}"
        )


def next_candidate(candidate: CandidateEnv, verdict: Verdict) -> CandidateEnv:
    """The candidate as the next stage receives it: current stage popped, verdict appended."""
    _check_head(candidate, verdict)
    if len(candidate.route) == 1:
        raise RouteError(f"stage {verdict.stage!r} is the last on the route: it must decide, not forward")
    return msgspec.structs.replace(
        candidate,
        idempotency_key=f"{candidate.idempotency_key}>{verdict.stage}",
        route=candidate.route[1:],
        verdicts=(*candidate.verdicts, verdict),
    )


async def forward(ctx: Context, candidate: CandidateEnv, verdict: Verdict) -> CandidateEnv:
    """Pass ``candidate`` to the next stage on its route; returns what was published."""
    nxt = next_candidate(candidate, verdict)
    await ctx.publish(subjects.stage(nxt.route[0]), nxt)
    return nxt


def rejection(candidate: CandidateEnv, verdict: Verdict, proposer_reward: float) -> CalibrationResult:
    """The final result of a candidate that failed ``verdict.stage``."""
    _check_head(candidate, verdict)
    if not 0.0 <= proposer_reward <= 1.0:
        raise ValueError(f"proposer_reward must be in [0, 1], got {proposer_reward}")
    return CalibrationResult(
        idempotency_key=f"{candidate.idempotency_key}>{verdict.stage}:rejected",
        episode_id=candidate.episode_id,
        env_id=candidate.env_id,
        assignment_id=candidate.assignment_id,
        decision="rejected",
        proposer_reward=proposer_reward,
        revision=candidate.revision,
        bundle=candidate.bundle,
        category=candidate.category,
        mode=candidate.mode,
        cost_usd=candidate.cost_usd,
        verdicts=(*candidate.verdicts, verdict),
        proposal=candidate.proposal,
    )


async def reject(ctx: Context, candidate: CandidateEnv, verdict: Verdict, proposer_reward: float = 0.0) -> CalibrationResult:
    """Publish the rejection of ``candidate`` on ``aes.result.calibration``; returns it."""
    result = rejection(candidate, verdict, proposer_reward)
    await ctx.publish(subjects.RESULT_CALIBRATION, result)
    return result
