"""Validator: the first admission gate. Does the candidate build and work?

For each candidate on ``aes.candidate.validate`` (fetched, checked and unpacked by
``Gate``): build the image once, run the reference solution and the empty solution
concurrently from that image, and publish a ``ValidationResult`` (failure logs go to
the blob store). A pass forwards the candidate along its route; a failure rejects it
with proposer reward 0 and, with revisions left, sends it back to its proposer with
those logs.
"""

from __future__ import annotations

import logging

from aes_proto import subjects
from aes_proto.messages import CandidateEnv, ValidationResult, Verdict

from aes_lib import faults
from aes_lib.bundle import Task
from aes_lib.domains.kinds import DomainKinds
from aes_lib.gate import Judgement, SandboxGate
from aes_lib.sandbox import ValidationReport, validate_task
from aes_lib.service import Context

log = logging.getLogger(__name__)


class ValidatorService(SandboxGate):
    stage = "validate"
    name = "validator"
    budget = 3600.0
    """A cold build may take up to the 1800 s build cap, then two trials."""

    def task_kinds(self) -> DomainKinds:
        return DomainKinds()

    async def judge(self, task: Task, candidate: CandidateEnv, ctx: Context) -> Judgement:
        assert self.images is not None, "setup() not run"
        labels = {"aes.env_id": candidate.env_id[:32], "aes.stage": self.stage}
        report = await validate_task(task.root, self.images, limits=self.limits, caps=self.caps, labels=labels)
        return Judgement(Verdict(stage=self.stage, ok=report.ok, reason=report.reason, detail=report.detail), report)

    def facts(self, judgement: Judgement) -> dict[str, object]:
        report = judgement.evidence
        if not isinstance(report, ValidationReport):  # a bad bundle never reached validate_task
            return {}
        return {"oracle_reward": report.oracle_reward, "nop_reward": report.nop_reward, "seconds": report.seconds}

    def feedback(self, judgement: Judgement) -> str:
        """The build log, or the oracle's and nop's agent and verifier output."""
        report = judgement.evidence
        return report.logs if isinstance(report, ValidationReport) else ""

    async def record(self, candidate: CandidateEnv, judgement: Judgement, ctx: Context) -> None:
        v, report = judgement.verdict, judgement.evidence
        if not isinstance(report, ValidationReport):  # a bad bundle never reached validate_task
            report = ValidationReport(task=candidate.bundle.key, ok=False, reason="invalid_bundle", detail=v.detail)
        logs = None
        if report.logs:
            logs = await faults.call(ctx.blobs.put_content, "logs/validate", report.logs.encode(), ".txt",
                                     deadline=ctx.settings.io_deadline, what="validate: write logs")
        await ctx.publish(subjects.RESULT_VALIDATION, ValidationResult(
            idempotency_key=f"{candidate.idempotency_key}:{self.stage}", episode_id=candidate.episode_id,
            env_id=candidate.env_id, ok=v.ok, reason=v.reason, detail=v.detail,
            oracle_reward=report.oracle_reward, nop_reward=report.nop_reward, logs=logs, seconds=report.seconds,
        ))
