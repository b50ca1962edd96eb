"""Planner: the solver's record per environment, and assignments for each round.

- ``RolloutStatsService`` (``aes.rollout.summary``) folds every solver rollout into
  its environment's ``EnvHistory`` in KV (compare-and-set; idempotent per rollout);
  the planner and the proposer's workspace read it.
- ``PlannerService`` (``aes.pool.plan``) reads the pool and those histories and
  publishes one replacement per retired task plus ``fresh`` new assignments (each
  direction by the parent's pass rate, or by a coin: ``AES_PLANNER_DIRECTION``); ids
  depend only on the round, so a redelivered plan republishes the same keys and
  JetStream drops the repeats.
"""

from __future__ import annotations

import logging

from aes_proto import subjects
from aes_proto.messages import PoolPlan, RolloutSummary
from aes_proto.records import HISTORY_BUCKET, EnvHistory, history_key

from aes_lib.bus import kv as kvs
from aes_lib.flywheel.config import FlywheelConfig
from aes_lib.flywheel.planner import fold, plan_round
from aes_lib.runners.pool_store import BUCKET, PoolStore
from aes_lib.service import Context, Service

log = logging.getLogger(__name__)


async def load_histories(kv, env_ids) -> dict[str, EnvHistory]:
    """The recorded environments among ``env_ids``."""
    out = {}
    for env_id in env_ids:
        if (h := await kvs.read(kv, history_key(env_id), EnvHistory)) is not None:
            out[env_id] = h
    return out


class RolloutStatsService(Service[RolloutSummary]):
    name = "planner-stats"
    subject = subjects.ROLLOUT_SUMMARY
    message_type = RolloutSummary

    async def handle(self, msg: RolloutSummary, ctx: Context) -> None:
        kv = await ctx.kv(HISTORY_BUCKET)
        await kvs.update(kv, history_key(msg.env_id), EnvHistory, lambda h: fold(h, msg))


class PlannerService(Service[PoolPlan]):
    name = "planner"
    subject = subjects.POOL_PLAN
    message_type = PoolPlan

    def __init__(self, config: FlywheelConfig | None = None) -> None:
        self.config = config

    async def setup(self, ctx: Context) -> None:
        self.config = self.config or FlywheelConfig.from_env()

    async def handle(self, msg: PoolPlan, ctx: Context) -> None:
        assert self.config is not None
        store = PoolStore(await ctx.kv(BUCKET), capacity=self.config.pool_capacity)
        active = await store.active_entries()
        retired = [e for e in [await store.entry(i) for i in msg.retired] if e is not None]
        stats = await load_histories(await ctx.kv(HISTORY_BUCKET), [e.env_id for e in active + retired])
        centre = (self.config.band_low + self.config.band_high) / 2
        for a in plan_round(active, retired, stats, msg.fresh, msg.round, mode=self.config.generation_mode, centre=centre,
                            attempts=self.config.proposals_per_assignment,
                            blind=self.config.planner_direction == "coin"):
            log.info("assignment issued", extra={
                "assignment_id": a.lineage.assignment_id, "round": a.lineage.round, "mode": a.lineage.mode,
                "parent_env_id": a.lineage.parent_env_id or "", "direction": a.direction, "category": a.lineage.category})
            await ctx.publish(subjects.ASSIGNMENT, a)
