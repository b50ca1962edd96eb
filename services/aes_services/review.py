"""Review gate: an LLM checks the candidate against the task-review rubric.

Every review is published as a ``ReviewResult``. A candidate with a failed
criterion is rejected only when ``AES_REVIEW_ENFORCE`` is on; otherwise it goes
on with the failures recorded in its verdict. A review the model could not
produce in a valid form (``ReviewResult.error``) never rejects: the reviewer's
failure is not the proposer's. An unreachable endpoint raises, so the runner
redelivers the candidate later.
"""

from __future__ import annotations

from aes_proto import subjects
from aes_proto.messages import CandidateEnv, ReviewResult, Verdict

from aes_lib.bundle import Task
from aes_lib.gate import Gate, Judgement
from aes_lib.models import chat_client
from aes_lib.review import Review, ReviewSettings, review_task
from aes_lib.service import Context

GATE = "review"


class ReviewEndpointError(RuntimeError):
    """No model endpoint is configured (``AES_MODEL_URL``)."""


def verdict_of(review: Review, enforce: bool) -> Verdict:
    """``ok`` means the candidate passes this gate, whatever the rubric said when not enforced."""
    if review.error:
        return Verdict(stage=GATE, ok=True, reason="review_error", detail=review.error)
    if not review.failed:
        return Verdict(stage=GATE, ok=True, reason="ok", detail=f"{len(review.criteria)} criteria pass or do not apply")
    failed = "; ".join(f"{c.name}: {c.reason}" for c in review.failed)
    mode = "rejected" if enforce else "recorded only, AES_REVIEW_ENFORCE is off"
    return Verdict(stage=GATE, ok=not enforce, reason="criteria_failed", detail=f"{mode}: {failed}")


class ReviewService(Gate):
    stage = GATE
    ack_wait = 120.0
    budget = 900.0

    async def setup(self, ctx: Context) -> None:
        if not ctx.settings.model_url:
            raise ReviewEndpointError("AES_MODEL_URL is empty: the review gate needs a model endpoint (aes up sets it)")
        self.settings = ReviewSettings.from_env()
        self.client = chat_client(ctx.settings)

    async def judge(self, task: Task, candidate: CandidateEnv, ctx: Context) -> Judgement:
        review = await review_task(task.root, self.client, self.settings)
        return Judgement(verdict_of(review, self.settings.enforce), review)

    async def record(self, candidate: CandidateEnv, judgement: Judgement, ctx: Context) -> None:
        review: Review | None = judgement.evidence
        await ctx.publish(
            subjects.RESULT_REVIEW,
            ReviewResult(
                idempotency_key=f"{candidate.idempotency_key}:{GATE}", episode_id=candidate.episode_id,
                env_id=candidate.env_id,
                ok=review is not None and not review.error and not review.failed,
                enforced=self.settings.enforce,
                criteria=review.criteria if review else (),
                model=self.client.model,
                error=review.error if review else judgement.verdict.detail,
            ),
        )
