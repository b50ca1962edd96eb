"""Pool manager: admissions into the active pool, pool reviews, and the review cadence.

Three services share the pool state in JetStream KV (``aes_lib.runners.pool_store``):

- ``PoolService`` (``aes.result.calibration``): an admitted candidate joins the pool
  exactly once, whatever the number of replicas or redeliveries; ``PoolEvent``.
- ``PoolReviewService`` (``aes.pool.review``): reruns the current
  solver on every active task, retires those outside the band (and, with
  ``AES_AUDIT_PASSING``, those whose passing attempt an audit calls a hack), then
  asks the planner for replacements (``PoolPlan`` on ``aes.pool.plan``).
- ``PolicyWatchService`` (``aes.policy.version``): every ``review_every`` solver
  updates, requests a review.
"""

from __future__ import annotations

import logging

from aes_proto import subjects
from aes_proto.messages import CalibrationResult, PolicyVersion, PoolEvent, PoolPlan, PoolReview
from aes_proto.records import REVIEW_BUCKET, PoolEntry, RolloutOutcome

from aes_lib import faults
from aes_lib.agents.trajectory import load_trajectory
from aes_lib.flywheel.config import FlywheelConfig
from aes_lib.flywheel.pool import out_of_band
from aes_lib.runners.pool_store import BUCKET, PoolStore
from aes_lib.agents.solver import publish_rollout
from aes_lib.runners.rollouts import cached, cached_audit
from aes_lib.models import chat_client
from aes_lib.review.audit import PASSING, Audit, AuditSettings, audit_task
from aes_lib.service import Context, Service
from aes_services.solver_backed import SolverBackedService

log = logging.getLogger(__name__)


async def _store(ctx: Context, config: FlywheelConfig) -> PoolStore:
    return PoolStore(await ctx.kv(BUCKET), capacity=config.pool_capacity)


class PoolService(Service[CalibrationResult]):
    name = "pool"
    subject = subjects.RESULT_CALIBRATION
    message_type = CalibrationResult

    def __init__(self, config: FlywheelConfig | None = None) -> None:
        self.config = config

    async def setup(self, ctx: Context) -> None:
        self.config = self.config or FlywheelConfig.from_env()

    async def handle(self, msg: CalibrationResult, ctx: Context) -> None:
        if msg.decision != "admitted" or msg.bundle is None:
            return
        assert self.config is not None
        store = await _store(ctx, self.config)
        entry = PoolEntry(
            env_id=msg.env_id, bundle=msg.bundle, category=msg.lineage.category, domain=msg.lineage.domain,
            mean_reward=msg.mean,
            # A seed calibrated on admission (an imported task without a reference) stays a seed:
            # its later rollouts keep the imported sandbox.
            source="seed" if msg.lineage.mode == "seed" else "calibration",
            assignment_id=msg.lineage.assignment_id, episode_id=msg.episode_id,
            round=msg.lineage.round, no_reference=msg.no_reference,
        )
        change = await store.admit(entry)
        assert change.admission is not None
        kind = change.admission.kind
        if kind == "duplicate":
            known = await store.entry(msg.env_id)
            # Our own admission, redelivered after a crash before its event went out:
            # announce it again under the same key (JetStream drops it if it did go out).
            if known is not None and not known.retired and known.assignment_id == msg.lineage.assignment_id:
                kind = "admitted"
        key = f"pool:{msg.env_id}:admitted" if kind == "admitted" else f"pool:{msg.env_id}:duplicate:{msg.idempotency_key}"
        log.info("pool admission", extra={"kind": kind, "env_id": msg.env_id, "mean_reward": msg.mean,
                                          "pool_size": change.size, "assignment_id": msg.lineage.assignment_id})
        await ctx.publish(subjects.POOL_EVENT, PoolEvent(
            idempotency_key=key, episode_id=msg.episode_id, env_id=msg.env_id, kind=kind,
            reason="calibrated" if kind == "admitted" else "already in the pool or retired",
            mean_reward=msg.mean, pool_size=change.size,
        ))
        for gone in change.admission.evicted:
            log.info("pool retired", extra={"env_id": gone, "reason": "pool_full", "pool_size": change.size})
            await ctx.publish(subjects.POOL_EVENT, PoolEvent(
                idempotency_key=f"pool:{gone}:retired", episode_id=msg.episode_id, env_id=gone,
                kind="retired", reason="pool_full", pool_size=change.size,
            ))


class PoolReviewService(SolverBackedService[PoolReview]):
    name = "pool-review"
    subject = subjects.POOL_REVIEW
    message_type = PoolReview
    ack_wait = 120.0
    budget = 14400.0
    """Reruns the solver on every pooled task."""

    async def setup(self, ctx: Context) -> None:
        await super().setup(ctx)
        self.audit = AuditSettings.from_env()
        self.auditor = (chat_client(ctx.settings, url=self.audit.model_url, model=self.audit.model,
                                    api_key=self.audit.api_key) if self.audit.passing else None)

    async def handle(self, msg: PoolReview, ctx: Context) -> None:
        assert self.config is not None and self.runner is not None
        rule = self.config.rule
        store = await _store(ctx, self.config)
        entries = await store.active_entries()
        reruns = {e.env_id: await self._rerun(e, msg, ctx) for e in entries}
        means = {env_id: sum(r.reward for r in outs) / len(outs) for env_id, outs in reruns.items()}
        reasons = {env_id: "too_easy" if means[env_id] > rule.band_high else "too_hard"
                   for env_id in out_of_band(means, rule.band_low, rule.band_high)}
        if self.auditor is not None:
            for entry in entries:
                passed = [o for o in reruns[entry.env_id] if o.reward >= 1.0]
                if passed and (await self._audit(entry, passed[0], ctx)).label == "hack" and self.audit.enforce:
                    reasons.setdefault(entry.env_id, "hacked")
        retired = list(reasons)
        for env_id, mean in means.items():
            await store.set_mean(env_id, mean)
        change = await store.retire(retired)
        log.info("pool reviewed", extra={"reviewed": len(means), "retired": len(retired), "pool_size": change.size,
                                         "policy_version": msg.policy_version})
        for env_id, reason in reasons.items():
            log.info("pool retired", extra={"env_id": env_id, "reason": reason, "mean_reward": means[env_id],
                                            "pool_size": change.size})
            await ctx.publish(subjects.POOL_EVENT, PoolEvent(
                idempotency_key=f"pool:{env_id}:retired", episode_id=msg.episode_id, env_id=env_id,
                kind="retired", reason=reason, mean_reward=means[env_id], pool_size=change.size,
            ))
        await ctx.publish(subjects.POOL_PLAN, PoolPlan(
            idempotency_key=f"{msg.idempotency_key}:plan", episode_id=msg.episode_id, round=msg.round,
            policy_version=msg.policy_version, fresh=msg.fresh, retired=tuple(retired),
        ))

    async def _rerun(self, entry: PoolEntry, msg: PoolReview, ctx: Context) -> list[RolloutOutcome]:
        """The current solver's attempts on ``entry``, with the calibration rule's budget."""
        assert self.runner is not None and self.config is not None
        runner, rule = self.runner, self.config.rule
        kv = await ctx.kv(REVIEW_BUCKET)
        outs: list[RolloutOutcome] = []
        while len(outs) < rule.rollouts_needed([o.reward for o in outs]):
            rid = f"{entry.env_id[:16]}-review-{msg.idempotency_key}-{len(outs)}"
            out = await cached(kv, rid, lambda rid=rid: runner.run(entry.bundle, entry.env_id, rid,
                                                                   imported=entry.source == "seed"))
            await publish_rollout(ctx, out, episode_id=msg.episode_id, group_id=f"{entry.env_id}:review:{msg.idempotency_key}",
                                  purpose="pool_review")
            outs.append(out)
        return outs

    async def _audit(self, entry: PoolEntry, passed: RolloutOutcome, ctx: Context) -> Audit:
        """The passing audit of one full-reward attempt (cached per review, as its reruns are)."""
        runner, auditor = self.runner, self.auditor
        assert runner is not None and auditor is not None

        async def run() -> Audit:
            traj = await faults.call(load_trajectory, ctx.blobs, passed.trajectory, deadline=ctx.settings.io_deadline,
                                     what=f"pool-review: read trajectory {passed.trajectory.key}")
            async with runner.task(entry.bundle) as task:
                return await audit_task(task.root, [traj], "", auditor, self.audit, PASSING)

        audit = await cached_audit(await ctx.kv(REVIEW_BUCKET), f"{passed.rollout_id}-audit", run)
        log.info("pool audit", extra={"env_id": entry.env_id, "label": audit.label or "audit_error",
                                      "reason": audit.reason or audit.error, "rollout_id": passed.rollout_id,
                                      "acts": audit.label == "hack" and self.audit.enforce})
        return audit


class PolicyWatchService(Service[PolicyVersion]):
    name = "pool-watch"
    subject = subjects.POLICY_VERSION
    message_type = PolicyVersion

    def __init__(self, config: FlywheelConfig | None = None) -> None:
        self.config = config

    async def setup(self, ctx: Context) -> None:
        self.config = self.config or FlywheelConfig.from_env()

    async def handle(self, msg: PolicyVersion, ctx: Context) -> None:
        assert self.config is not None
        # Due on every review_every-th solver update (a proposer update of the shared
        # policy, or the proposer's own policy, leaves the solver as it was);
        # stateless, hence safe under redelivery and replicas.
        n = msg.solver_updates
        if msg.trained_role != "solver" or msg.policy == "proposer" or n <= 0 or n % self.config.review_every:
            return
        log.info("pool review requested", extra={"solver_updates": n, "policy_version": msg.version})
        await ctx.publish(subjects.POOL_REVIEW, PoolReview(
            idempotency_key=f"review:{msg.policy}:s{n}", episode_id=f"review-s{n}",
            round=n // self.config.review_every, policy_version=msg.version, fresh=0,
        ))
