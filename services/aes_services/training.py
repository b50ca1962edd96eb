"""Training rollouts: the pool's environments, attempted in groups by the current policy.

- ``WavePlannerService`` (``aes.training.wave``): samples environments from the
  active pool (weighted by their last training group, ``AES_TRAINING_BUFFER_WEIGHT``) and
  publishes one ``RolloutRequest`` per attempt.
- ``TrainingRolloutService`` (``aes.rollout.request``): runs one attempt with the
  served policy and publishes it (``RolloutSummary`` with purpose ``training`` and a
  ``TrajectoryRef`` of its group). An attempt waits (redelivery with backoff) until the
  engine serves the version the wave asked for, so a wave never samples stale weights.
  Finished attempts are cached in KV by rollout id: a redelivery after a crash reruns
  nothing and republishes the same keys. Scales by replicas like every stage.
"""

from __future__ import annotations

import logging

from aes_proto import subjects
from aes_proto.messages import RolloutRequest, TrainingWave
from aes_proto.records import HISTORY_BUCKET, TRAINING_BUCKET

from aes_lib.agents.loop import LoopLimits
from aes_lib.flywheel.config import FlywheelConfig
from aes_lib.runners.pool_store import BUCKET, PoolStore
from aes_lib.agents.solver import publish_rollout
from aes_lib.runners.rollouts import cached
from aes_lib.flywheel.training import TrainingConfig, buffer_weights, wave_requests
from aes_lib.models.weights import engine_client
from aes_lib.service import Context, Service
from aes_services.planner import load_histories

log = logging.getLogger(__name__)


def training_limits(cfg: TrainingConfig, protocol: str = "fenced") -> LoopLimits:
    """A training attempt's limits (before ``LoopLimits.within`` its task's timeout)."""
    return LoopLimits(max_turns=cfg.max_turns, max_tokens=cfg.max_tokens, temperature=cfg.temperature,
                      history_turns=cfg.history_turns, context_tokens=cfg.context_tokens, protocol=protocol)


class EngineBehindError(RuntimeError):
    """The engine does not serve the wave's version yet (the weight sync is still loading it)."""


class WavePlannerService(Service[TrainingWave]):
    name = "training-wave"
    subject = subjects.TRAINING_WAVE
    message_type = TrainingWave

    async def handle(self, msg: TrainingWave, ctx: Context) -> None:
        capacity = FlywheelConfig.from_env().pool_capacity
        entries = await PoolStore(await ctx.kv(BUCKET), capacity=capacity).active_entries()
        if not entries:
            log.warning("wave skipped: the pool is empty", extra={"wave_id": msg.wave_id})
            return
        cfg = TrainingConfig.from_env()
        weights = None
        if cfg.buffer_weight < 1.0:  # the histories are the planner-stats service's
            histories = await load_histories(await ctx.kv(HISTORY_BUCKET), [e.env_id for e in entries])
            weights = buffer_weights(histories, cfg.buffer_weight)
        requests = wave_requests(msg, entries, cfg.allow_forgeable, weights)
        log.info("wave planned", extra={"wave_id": msg.wave_id, "policy_version": msg.policy_version,
                                        "groups": len({r.group_id for r in requests}), "attempts": len(requests)})
        for req in requests:
            await ctx.publish(subjects.ROLLOUT_REQUEST, req)


class TrainingRolloutService(Service[RolloutRequest]):
    name = "rollouts"
    subject = subjects.ROLLOUT_REQUEST
    message_type = RolloutRequest
    ack_wait = 120.0
    budget = 1800.0
    concurrency = 4
    """Attempts in flight per replica: the torch engine decodes concurrent requests together."""

    def __init__(self, runner=None, config: TrainingConfig | None = None) -> None:
        self.runner = runner
        self.config = config

    async def setup(self, ctx: Context) -> None:
        cfg = self.config = self.config or TrainingConfig.from_env()
        self.engine = engine_client(ctx.settings.engine, ctx.settings.model_url)
        if self.runner is None:
            from aes_lib.runners.trial_runner import TrialRolloutRunner

            flywheel = FlywheelConfig.from_env()
            self.runner = TrialRolloutRunner.from_settings(ctx.settings, ctx.blobs, flywheel,
                                                           training_limits(cfg, flywheel.agent_protocol))

    async def handle(self, msg: RolloutRequest, ctx: Context) -> None:
        kv = await ctx.kv(TRAINING_BUCKET)

        async def attempt():
            served = await self.engine.version()
            if served < msg.policy_version:
                raise EngineBehindError(f"engine serves v{served}, wave {msg.wave_id} needs v{msg.policy_version}")
            return await self.runner.run(msg.bundle, msg.env_id, msg.rollout_id, imported=msg.imported)

        out = await cached(kv, msg.rollout_id, attempt)
        log.info("rollout done", extra={"rollout_id": msg.rollout_id, "env_id": msg.env_id, "reward": out.reward,
                                        "wave_id": msg.wave_id, "policy_version": msg.policy_version})
        await publish_rollout(ctx, out, episode_id=msg.wave_id, group_id=msg.group_id, purpose="training",
                              group_size=msg.group_size)
