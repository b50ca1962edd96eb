"""What a proposer episode puts on the bus: a candidate, or a recorded failure."""

from __future__ import annotations

import msgspec

from aes_proto import subjects
from aes_proto.messages import Assignment, BlobRef, CalibrationResult, CandidateEnv, ProposalRef, Verdict

from aes_lib.bundle import PackedBundle


def store_bundle(store, packed: PackedBundle) -> BlobRef:
    return store.put_content("bundles", packed.data, suffix=".tar.gz")


def proposal(a: Assignment, trajectory: BlobRef) -> ProposalRef:
    """The episode that answered ``a``, as a member of the assignment's proposer group."""
    return ProposalRef(trajectory=trajectory, group_id=a.group_id or a.lineage.assignment_id, group_size=a.group_size)


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
    trajectory: BlobRef | None,
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
        proposal=proposal(a, trajectory) if trajectory else None,
    )


def no_candidate(a: Assignment, reason: str, detail: str, cost_usd: float = 0.0,
                 trajectory: BlobRef | None = None) -> CalibrationResult:
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
        proposal=proposal(a, trajectory) if trajectory else None,
    )


async def publish_candidate(ctx, candidate: CandidateEnv) -> None:
    """To the first admission stage; each stage pops itself off ``route``."""
    await ctx.publish(subjects.stage(candidate.route[0]), candidate)


async def publish_failure(ctx, result: CalibrationResult) -> None:
    await ctx.publish(subjects.RESULT_CALIBRATION, result)
