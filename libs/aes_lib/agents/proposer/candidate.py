"""What a proposer episode puts on the bus: a candidate, or a recorded failure."""

from __future__ import annotations

import msgspec

from aes_proto import subjects
from aes_proto.messages import Assignment, BlobRef, CalibrationResult, CandidateEnv, ProposalRef, Verdict
from aes_proto.trajectory import Trajectory

from aes_lib.admission import carried_instruction
from aes_lib.bundle import PackedBundle


def store_bundle(store, packed: PackedBundle) -> BlobRef:
    return store.put_content("bundles", packed.data, suffix=".tar.gz")


def proposal(a: Assignment, trajectory: BlobRef, episode: Trajectory) -> ProposalRef:
    """The episode that answered ``a`` (stored at ``trajectory``), as a member of the assignment's
    proposer group, with the scalars its learner sample needs."""
    ref = ProposalRef(trajectory=trajectory, group_id=a.group_id or a.lineage.assignment_id, group_size=a.group_size)
    return with_scalars(ref, episode)


def with_scalars(ref: ProposalRef, episode: Trajectory) -> ProposalRef:
    """``ref`` with what the learner's sample needs of its ``episode``, so no reader loads it for that."""
    return msgspec.structs.replace(ref, rollout_id=episode.rollout_id, policy_version=episode.policy_version,
                                   n_tokens=episode.n_tokens, finished=episode.stop_reason != "model_error")


def candidate_env(
    a: Assignment,
    packed: PackedBundle,
    bundle: BlobRef,
    route: tuple[str, ...],
    *,
    model: str,
    cost_usd: float,
    prompt_tokens: int,
    completion_tokens: int,
    episode: ProposalRef | None,
) -> CandidateEnv:
    if not route:
        raise ValueError("the admission route is empty: set AES_ROUTE")
    return CandidateEnv(
        idempotency_key=f"{a.idempotency_key}:candidate",
        episode_id=a.episode_id,
        env_id=packed.sha256,
        bundle=bundle,
        lineage=msgspec.structs.replace(a.lineage, proposer_model=model, cost_usd=cost_usd),
        direction=a.direction,
        route=route,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        proposal=episode,
        instruction=carried_instruction(packed.instruction),
    )


def no_candidate(a: Assignment, reason: str, detail: str, cost_usd: float = 0.0,
                 episode: ProposalRef | None = None) -> CalibrationResult:
    """The episode produced nothing to admit: proposer reward 0, visible to pool and planner
    (and, with its trajectory, a proposer sample for the learner)."""
    return CalibrationResult(
        idempotency_key=f"{a.idempotency_key}:no_candidate",
        episode_id=a.episode_id,
        env_id="",
        lineage=msgspec.structs.replace(a.lineage, cost_usd=cost_usd),
        decision="rejected",
        proposer_reward=0.0,
        verdicts=(Verdict(stage="proposer", ok=False, reason=reason, detail=detail[:2000]),),
        proposal=episode,
    )


async def publish_candidate(ctx, candidate: CandidateEnv) -> None:
    """To the first admission stage; each stage pops itself off ``route``."""
    await ctx.publish(subjects.stage(candidate.route[0]), candidate)


async def publish_failure(ctx, result: CalibrationResult) -> None:
    await ctx.publish(subjects.RESULT_CALIBRATION, result)
