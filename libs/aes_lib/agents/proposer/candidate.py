"""What a proposer episode puts on the bus: a candidate, or a recorded failure."""

from __future__ import annotations

from aes_proto import subjects
from aes_proto.messages import (
    Assignment,
    BlobRef,
    CalibrationResult,
    CandidateEnv,
    GenerationMode,
    ProposalRef,
    Verdict,
)

from aes_lib.bundle import PackedBundle


def store_bundle(store, packed: PackedBundle) -> BlobRef:
    return store.put_content("bundles", packed.data, suffix=".tar.gz")


def proposal(a: Assignment, trajectory: BlobRef) -> ProposalRef:
    """The episode that answered ``a``, as a member of the assignment's proposer group."""
    return ProposalRef(trajectory=trajectory, group_id=a.group_id or a.assignment_id, group_size=a.group_size)


def candidate_env(
    a: Assignment,
    packed: PackedBundle,
    bundle: BlobRef,
    route: tuple[str, ...],
    *,
    mode: GenerationMode,
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
        assignment_id=a.assignment_id,
        revision=a.revision,
        parent_env_id=a.parent_env_id,
        category=a.category,
        route=route,
        mode=mode,
        proposer_model=model,
        cost_usd=cost_usd,
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
        assignment_id=a.assignment_id,
        decision="rejected",
        proposer_reward=0.0,
        revision=a.revision,
        category=a.category,
        mode=a.mode,
        cost_usd=cost_usd,
        verdicts=(Verdict(stage="proposer", ok=False, reason=reason, detail=detail[:2000]),),
        proposal=proposal(a, trajectory) if trajectory else None,
    )


async def publish_candidate(ctx, candidate: CandidateEnv) -> None:
    """To the first admission stage; each stage pops itself off ``route``."""
    await ctx.publish(subjects.stage(candidate.route[0]), candidate)


async def publish_failure(ctx, result: CalibrationResult) -> None:
    await ctx.publish(subjects.RESULT_CALIBRATION, result)
