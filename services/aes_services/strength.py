"""Verifier-strength gate: the tests must fail wrong solutions (``aes_lib.sandbox.strength``).

For each candidate on ``aes.candidate.strength`` (after ``validate``, so its reference scores 1):
run the near misses it ships and mutants of its reference's end state through the trial path.
``weak_tests`` or ``near_miss_unexplained`` rejects it (``AES_STRENGTH_ENFORCE``; off: recorded
and passed on) and, with revisions left, sends it back with the wrong solution the tests passed
and that trial's verifier output. The detail says what the check cost (trials, container seconds).
"""

from __future__ import annotations

from aes_proto.messages import CandidateEnv, Verdict

from aes_lib.bundle import Task
from aes_lib.domains.kinds import DomainKinds
from aes_lib.gate import Judgement, SandboxGate, enforced
from aes_lib.sandbox.strength import StrengthReport, StrengthSettings, check_strength
from aes_lib.service import Context

GATE = "strength"


def verdict_of(report: StrengthReport, enforce: bool) -> Verdict:
    """``ok`` means the candidate passes this gate, whatever the check found when not enforced."""
    cost = f" [{report.trials} trials, {report.seconds:.1f} container s]"
    return enforced(GATE, report.ok, report.reason, report.detail + cost, enforce, "AES_STRENGTH_ENFORCE")


class StrengthGateService(SandboxGate):
    stage = GATE
    budget = 3600.0
    """Up to nine mutants and the near misses, each a trial of the reference's length."""

    def task_kinds(self) -> DomainKinds:
        return DomainKinds()

    async def setup(self, ctx: Context) -> None:
        await super().setup(ctx)
        self.settings = StrengthSettings.from_env()

    async def judge(self, task: Task, candidate: CandidateEnv, ctx: Context) -> Judgement:
        assert self.images is not None, "setup() not run"
        labels = {"aes.env_id": candidate.env_id[:32], "aes.stage": self.stage}
        image = await self.images.build(task)
        report = await check_strength(task, self.images, image=image, caps=self.caps, labels=labels,
                                      max_mutants=self.settings.max_mutants, concurrency=self.settings.concurrency)
        return Judgement(verdict_of(report, self.settings.enforce), report)

    def facts(self, judgement: Judgement) -> dict[str, object]:
        report = judgement.evidence
        return {"trials": report.trials, "seconds": report.seconds} if isinstance(report, StrengthReport) else {}

    def feedback(self, judgement: Judgement) -> str:
        """The verifier's output on the wrong solution it gave full reward."""
        report = judgement.evidence
        return report.logs if isinstance(report, StrengthReport) else ""
