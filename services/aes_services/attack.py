"""Attacker gate: an adversary agent tries to earn the reward without the work (``aes_lib.runners.attack``).

For each candidate on ``aes.candidate.attack`` (after ``validate``, so its reference scores 1):
``AES_ATTACK_ATTEMPTS`` attack episodes through the training trial path, then, only if one earned
anything, the empty solution and an honest attempt to compare with. ``verifier_forgeable`` rejects
the candidate (``AES_ATTACK_ENFORCE``; off: recorded and passed on) and, with revisions left,
sends it back with the attack's commands and the tests' output, so the proposer fixes its
verifier; the revision repeats the whole route, so its reference must still score 1. Not on the
default route (each candidate costs model episodes): add ``attack`` to ``AES_ROUTE`` before
``calibrate``, and ``aes up`` starts it.
"""

from __future__ import annotations

from aes_proto.messages import CandidateEnv, Verdict

from aes_lib.agents.solver import solver_limits
from aes_lib.bundle import Task
from aes_lib.domains.kinds import DomainKinds
from aes_lib.flywheel.config import FlywheelConfig
from aes_lib.gate import Judgement, SandboxGate, enforced
from aes_lib.models import chat_client
from aes_lib.review.audit import AuditSettings
from aes_lib.runners.attack import AttackReport, AttackSettings, attack_task
from aes_lib.service import Context

GATE = "attack"


def verdict_of(report: AttackReport, enforce: bool) -> Verdict:
    """``ok`` means the candidate passes this gate, whatever the attack found when not enforced."""
    cost = f" [{report.trials} trials, {report.seconds:.1f} container s, {report.tokens} attacker tokens]"
    return enforced(GATE, report.ok, report.reason, report.detail + cost, enforce, "AES_ATTACK_ENFORCE")


class AttackGateService(SandboxGate):
    stage = GATE
    budget = 3600.0
    """A few attack episodes, the empty solution and one honest attempt, one after another."""

    def task_kinds(self) -> DomainKinds:
        return DomainKinds()

    async def setup(self, ctx: Context) -> None:
        await super().setup(ctx)
        self.settings = AttackSettings.from_env()
        self.client = chat_client(ctx.settings, url=self.settings.model_url, model=self.settings.model,
                                  api_key=self.settings.api_key)
        self.loop_limits = solver_limits(FlywheelConfig.from_env())
        self.audit = AuditSettings.from_env()

    async def judge(self, task: Task, candidate: CandidateEnv, ctx: Context) -> Judgement:
        assert self.images is not None, "setup() not run"
        key = f"{candidate.env_id[:16]}-{candidate.lineage.assignment_id}-rev{candidate.lineage.revision}"
        report = await attack_task(task, self.client, self.images, ctx.blobs, self.loop_limits, self.settings,
                                   env_id=candidate.env_id, key=key, audit=self.audit)
        return Judgement(verdict_of(report, self.settings.enforce), report)

    def facts(self, judgement: Judgement) -> dict[str, object]:
        report = judgement.evidence
        if not isinstance(report, AttackReport):
            return {}
        return {"attack_rewards": list(report.rewards), "trials": report.trials, "seconds": report.seconds}

    def feedback(self, judgement: Judgement) -> str:
        """The forging attack: what it ran and what the tests said, and the stored trajectory."""
        report = judgement.evidence
        if not isinstance(report, AttackReport):
            return ""
        where = f"\n(trajectory: {report.trajectory.key})" if report.trajectory else ""
        return ("Make the tests reject this attack (check the answer itself, against data the agent cannot "
                f"rewrite); the reference solution must still score 1.\n{report.evidence}{where}")
