"""Planner: the latest rollouts per environment, and assignments for each round.

- ``RolloutStatsService`` (``aes.rollout.summary``) folds every solver rollout into
  its environment's ``EnvStats`` in KV (compare-and-set; idempotent per rollout).
- ``PlannerService`` (``aes.pool.review``, step ``plan``) reads the pool and those
  stats and publishes one replacement per retired task plus ``fresh`` new
  assignments; ids depend only on the round, so a redelivered plan republishes
  the same keys and JetStream drops the repeats.
"""

from __future__ import annotations

import msgspec
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError

from aes_proto import subjects
from aes_proto.messages import PoolReview, RolloutSummary

from aes_lib.flywheel.config import FlywheelConfig
from aes_lib.flywheel.planner import EnvStats, plan_round, record
from aes_lib.flywheel.pool_store import BUCKET, PoolStore
from aes_lib.service import Context, Service

STATS_BUCKET = "aes_planner"
"""KV bucket of ``EnvStats`` by ``env.<env_id>``."""


async def load_stats(kv, env_ids) -> dict[str, EnvStats]:
    out = {}
    for env_id in env_ids:
        try:
            out[env_id] = msgspec.msgpack.decode((await kv.get(f"env.{env_id}")).value, type=EnvStats)
        except KeyNotFoundError:
            pass
    return out


class RolloutStatsService(Service[RolloutSummary]):
    name = "planner-stats"
    subject = subjects.ROLLOUT_SUMMARY
    message_type = RolloutSummary

    async def handle(self, msg: RolloutSummary, ctx: Context) -> None:
        # Diagnostic attempts see the reference solution: not the solver's own pass rate.
        if msg.role != "solver" or msg.purpose == "diagnostic":
            return
        kv = await ctx.kv(STATS_BUCKET)
        key = f"env.{msg.env_id}"
        while True:
            try:
                e = await kv.get(key)
                old, rev = msgspec.msgpack.decode(e.value, type=EnvStats), e.revision
            except KeyNotFoundError:
                old, rev = None, 0
            new = record(old, msg)
            if new is old:
                return
            try:
                data = msgspec.msgpack.encode(new)
                await (kv.create(key, data) if rev == 0 else kv.update(key, data, last=rev))
                return
            except KeyWrongLastSequenceError:
                continue  # a replica updated it first


class PlannerService(Service[PoolReview]):
    name = "planner"
    subject = subjects.POOL_REVIEW
    message_type = PoolReview

    def __init__(self, config: FlywheelConfig | None = None) -> None:
        self.config = config

    async def setup(self, ctx: Context) -> None:
        self.config = self.config or FlywheelConfig.from_env()

    async def handle(self, msg: PoolReview, ctx: Context) -> None:
        if msg.step != "plan":
            return  # reviews are the pool reviewer's
        assert self.config is not None
        store = PoolStore(await ctx.kv(BUCKET), capacity=self.config.pool_capacity)
        active = await store.active_entries()
        retired = [e for e in [await store.entry(i) for i in msg.retired] if e is not None]
        stats = await load_stats(await ctx.kv(STATS_BUCKET), [e.env_id for e in active + retired])
        centre = (self.config.band_low + self.config.band_high) / 2
        for a in plan_round(active, retired, stats, msg.fresh, msg.round, mode=self.config.generation_mode, centre=centre,
                            attempts=self.config.proposals_per_assignment):
            await ctx.publish(subjects.ASSIGNMENT, a)
