"""Calibrator: the last admission stage. Solver rollouts decide admission and the proposer's reward.

Consumes ``aes.candidate.calibrate``; publishes each attempt (``RolloutSummary``, ``TrajectoryRef``),
the ``CalibrationResult``, and, for a candidate outside the band with revisions
left, an ``Assignment`` (revision + 1) that returns it to its proposer with the
evidence. A task without a reference solution (an imported one, ``no_reference``) is decided by
the attempts alone: admitted if some pass, else ``unverified_too_hard``. With ``AES_AUDIT_ENABLED``
a too-hard candidate is audited (``aes_lib.review.audit``): its ``audit`` verdict says ``hard`` or
``defect``, and an enforced defect goes back as a repair. Every published key derives from the
candidate, and finished rollouts and audits are cached in KV, so a redelivery (after a crash)
resumes and republishes nothing new.
"""

from __future__ import annotations

import dataclasses
import logging

from aes_proto import subjects
from aes_proto.messages import CalibrationResult, CandidateEnv, Verdict
from aes_proto.records import CALIBRATION_BUCKET

from aes_lib import faults
from aes_lib.agents.solver import publish_rollout
from aes_lib.agents.trajectory import load_trajectory
from aes_lib.flywheel.calibrate import DIAGNOSTIC, Calibration, calibrate
from aes_lib.flywheel.revision import (AuditNote, RolloutEvidence, audited, feedback_text, revision_assignment,
                                       sends_back)
from aes_lib.gate import enforced
from aes_lib.models import chat_client
from aes_lib.review.audit import Audit, AuditSettings, audit_task
from aes_lib.runners.rollouts import cached, cached_audit
from aes_lib.service import Context
from aes_services.solver_backed import SolverBackedService

log = logging.getLogger(__name__)


def rollout_id(c: CandidateEnv, i: int) -> str:
    kind = "diag" if i == DIAGNOSTIC else f"cal{i}"
    return f"{c.env_id[:16]}-{c.lineage.assignment_id}-rev{c.lineage.revision}-{kind}"


def audit_id(c: CandidateEnv) -> str:
    return f"{c.env_id[:16]}-{c.lineage.assignment_id}-rev{c.lineage.revision}-audit"


class CalibratorService(SolverBackedService[CandidateEnv]):
    name = "calibrator"
    subject = subjects.stage("calibrate")
    message_type = CandidateEnv
    ack_wait = 120.0
    budget = 3600.0
    """Up to eight solver rollouts and a diagnostic one, one after another."""
    decides = True

    async def setup(self, ctx: Context) -> None:
        await super().setup(ctx)
        self.audit = AuditSettings.from_env()
        self.auditor = (chat_client(ctx.settings, url=self.audit.model_url, model=self.audit.model,
                                    api_key=self.audit.api_key) if self.audit.enabled else None)

    async def handle(self, msg: CandidateEnv, ctx: Context) -> None:
        assert self.runner is not None and self.config is not None
        runner, rule = self.runner, self.config.rule
        if not sends_back(msg.lineage, rule.max_revisions):  # a seed, or no revision left: decide, never revise
            rule = dataclasses.replace(rule, max_revisions=0)
        kv = await ctx.kv(CALIBRATION_BUCKET)

        async def rollout(i: int, hints: str | None) -> RolloutEvidence:
            rid = rollout_id(msg, i)
            # An imported task (a seed) runs in the sandbox imported tasks get, as in later rollouts.
            out = await cached(kv, rid, lambda: runner.run(msg.bundle, msg.env_id, rid, hints,
                                                           imported=msg.lineage.mode == "seed"))
            await publish_rollout(ctx, out, episode_id=msg.episode_id, group_id=f"{msg.env_id}:calibration:rev{msg.lineage.revision}",
                                  purpose="diagnostic" if i == DIAGNOSTIC else "calibration")
            return RolloutEvidence(out.reward, out.failure, out.trajectory)

        async def hints() -> str:
            return await runner.reference_solution(msg.bundle)

        result = await calibrate(rule, msg.lineage.revision, rollout, hints, no_reference=msg.no_reference)
        d = result.decision
        audit_verdicts: tuple[Verdict, ...] = ()
        note = None
        if d.outcome == "too_hard" and self.auditor is not None:
            audit = await cached_audit(kv, audit_id(msg), lambda: self._audit(msg, result, ctx))
            acts = self.audit.enforce and audit.label == "defect"
            note = AuditNote(audit.label, audit.reason, acts) if audit.label else None
            d = audited(d, acts)
            audit_verdicts = (audit_verdict(audit, self.audit.enforce),)
        feedback = feedback_text(d, result.rollouts, result.diagnostic, (rule.band_low, rule.band_high), note)
        log.info("calibrated", extra={
            "decision": d.outcome, "revise": d.resubmit, "mean_reward": d.mean, "std": d.std,
            "rollouts": len(result.rollouts), "proposer_reward": d.proposer_reward, "env_id": msg.env_id,
            "assignment_id": msg.lineage.assignment_id, "revision": msg.lineage.revision})
        await ctx.publish(subjects.RESULT_CALIBRATION, CalibrationResult(
            idempotency_key=f"{msg.idempotency_key}:calibrate", episode_id=msg.episode_id,
            env_id=msg.env_id, lineage=msg.lineage, decision=d.outcome,
            rewards=tuple(r.reward for r in result.rollouts), mean=d.mean, std=d.std,
            proposer_reward=d.proposer_reward, resubmitted=d.resubmit,
            bundle=msg.bundle, proposal=msg.proposal, no_reference=msg.no_reference,
            verdicts=msg.verdicts + audit_verdicts + (Verdict(stage="calibrate", ok=d.outcome == "admitted", reason=d.outcome,
                                             detail=feedback if d.outcome != "admitted" else ""),),
        ))
        if d.resubmit and d.direction is not None:
            await ctx.publish(subjects.ASSIGNMENT, revision_assignment(msg, d.direction, feedback, pass_rate=d.mean))

    async def _audit(self, msg: CandidateEnv, result: Calibration, ctx: Context) -> Audit:
        assert self.runner is not None and self.auditor is not None
        attempts = []
        for r in result.rollouts:
            if r.reward < 1.0 and r.trajectory is not None:
                attempts.append(await faults.call(load_trajectory, ctx.blobs, r.trajectory,
                                                  deadline=ctx.settings.io_deadline,
                                                  what=f"calibrator: read trajectory {r.trajectory.key}"))
        diag = result.diagnostic
        diagnostic = ("No attempt was given the reference solution." if diag is None else
                      f"An attempt given the reference solution as hints scored {diag.reward:.2f}"
                      + (f" ({diag.failure})." if diag.failure else "."))
        async with self.runner.task(msg.bundle) as task:
            return await audit_task(task.root, attempts, diagnostic, self.auditor, self.audit)


def audit_verdict(audit: Audit, enforce: bool) -> Verdict:
    """The ``audit`` stage's verdict: fails only for an enforced ``defect``; an audit without an
    answer (``audit_error``) never fails, since the auditor's failure is not the proposer's."""
    cost = f"{audit.model}, {audit.attempts} call(s), {audit.prompt_tokens}+{audit.completion_tokens} tokens"
    if audit.label is None:
        return Verdict(stage="audit", ok=True, reason="audit_error", detail=f"{audit.error} ({cost})")
    return enforced("audit", audit.label == "hard", audit.label, f"{audit.reason} ({cost})", enforce,
                    "AES_AUDIT_ENFORCE")
