"""Learner: scored trajectories in, DPPO updates, new policy versions out.

Consumes ``TrajectoryRef`` (``aes.trajectory``), loads each trajectory from the
blob store and hands it to the batcher. Whenever a batch is full it runs one DPPO
update (in a worker thread, so the runner keeps heart-beating), writes a
safetensors checkpoint, and publishes ``PolicyVersion`` and ``LearnerStats``.
The latest version is kept in KV so a restarted learner resumes from it (weights
only: the AdamW moments and the pending samples of incomplete groups are lost).
A trajectory that cannot be trained on raises ``TrajectoryFormatError`` and, after
the runner's redeliveries, lands on the dead-letter subject with that error.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import msgspec
import torch

from aes_lib.agents.trajectory import load_trajectory
from aes_lib.learner import (
    Batcher,
    DppoTrainer,
    LearnerConfig,
    LearnerConfigError,
    Sample,
    load_checkpoint,
    publish_policy,
    turns_from_trajectory,
)
from aes_lib.learner.base_model import bundled_base_model
from aes_lib.service import Context, Service
from aes_proto import subjects
from aes_proto.messages import LearnerStats, PolicyVersion, TrajectoryRef

log = logging.getLogger(__name__)

STATE_BUCKET = "aes_learner"
"""KV bucket: run id -> the latest ``PolicyVersion`` (JSON)."""


class LearnerService(Service[TrajectoryRef]):
    name = "learner"
    subject = subjects.TRAJECTORY
    message_type = TrajectoryRef
    ack_wait = 120.0

    def __init__(self, config: LearnerConfig | None = None, run_id: str = "learner") -> None:
        self.config = config
        self.run_id = run_id
        self.version = 0

    async def setup(self, ctx: Context) -> None:
        from transformers import AutoModelForCausalLM

        cfg = self.config = self.config or LearnerConfig.from_env()
        if cfg.model_path:
            path = Path(cfg.model_path)
            if not (path / "config.json").is_file():
                raise LearnerConfigError(f"AES_LEARNER_MODEL_PATH must be a transformers model folder, got {path}")
        else:
            path = await asyncio.to_thread(bundled_base_model, ctx.settings.home)
        torch.manual_seed(cfg.seed)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(cfg.device)
        pv = await self._latest(ctx)
        if pv is not None:
            load_checkpoint(ctx.blobs, pv.checkpoint, model)
            self.version = pv.version
            log.info("resumed %s at policy version %d", self.run_id, pv.version)
        self.base_model = path.name
        self.trainer = DppoTrainer(model, cfg)
        self.batcher = Batcher(cfg)

    async def _latest(self, ctx: Context) -> PolicyVersion | None:
        from nats.js.errors import KeyNotFoundError

        try:
            entry = await (await ctx.kv(STATE_BUCKET)).get(self.run_id)
        except KeyNotFoundError:
            return None
        return msgspec.json.decode(entry.value, type=PolicyVersion) if entry.value else None

    async def handle(self, msg: TrajectoryRef, ctx: Context) -> None:
        traj = load_trajectory(ctx.blobs, msg.trajectory)
        self.batcher.add(Sample(msg.rollout_id, msg.group_id, msg.role, msg.reward, turns_from_trajectory(traj),
                                finished=msg.finished, policy_version=msg.policy_version))
        while (batch := self.batcher.next_batch()) is not None:
            stats = await asyncio.to_thread(self.trainer.step, batch)
            self.version += 1
            pv = await publish_policy(ctx, self.trainer.model, version=self.version, step=self.version,
                                      prefix=self.config.checkpoint_prefix, base_model=self.base_model,
                                      run_id=self.run_id)
            await (await ctx.kv(STATE_BUCKET)).put(self.run_id, msgspec.json.encode(pv))
            await ctx.publish(subjects.LEARNER_STATS, LearnerStats(
                idempotency_key=f"{self.run_id}:stats:{self.version}", episode_id=self.run_id,
                step=self.version, policy_version=self.version, loss=stats.loss, mean_reward=batch.mean_reward,
                mask_fraction=stats.mask_fraction, mean_divergence=stats.mean_divergence,
                groups_used=len(batch.groups), groups_dropped=batch.dropped + batch.evicted, tokens=stats.tokens,
                carried_over=batch.carried_over, masked_tokens=stats.masked_tokens, role=batch.role,
                grad_norm=stats.grad_norm,
            ))
            log.info("policy v%d: loss %.4f, masked %d/%d tokens, mean divergence %.4f",
                     self.version, stats.loss, stats.masked_tokens, stats.tokens, stats.mean_divergence)
