"""Learner: scored trajectories in, DPPO updates, new policy versions out.

Consumes ``TrajectoryRef`` (every role's with the shared policy; one role's with
separate models), loads each trajectory from the blob store and hands it to the
batcher. Whenever a batch is full it runs one DPPO update (in a worker thread, so
the runner keeps heart-beating), writes a safetensors checkpoint, and publishes
``PolicyVersion`` and ``LearnerStats``.

Nothing acknowledged is lost to a crash: before a message is acked, the learner's
state (the samples it holds, in arrival order; the groups it closed; its counters;
the latest version with its AdamW moments) is written to the blob store and pointed
to from KV, and a restarted learner rebuilds weights, optimizer and batcher from it.
A redelivered sample of a closed group is ignored, so none is trained twice.
Samples older than ``max_policy_lag`` versions are dropped and counted. A
trajectory that cannot be trained on raises ``TrajectoryFormatError`` and, after
the runner's redeliveries, lands on the dead-letter subject with that error.
"""

from __future__ import annotations

import asyncio
import io
import logging
import time
from pathlib import Path
from typing import ClassVar

import msgspec
import torch

from aes_lib.agents.trajectory import load_trajectory
from aes_lib.learner import (
    Batcher,
    DppoTrainer,
    LearnerConfig,
    LearnerConfigError,
    Sample,
    checkpoint_key,
    load_checkpoint,
    publish_policy,
    turns_from_trajectory,
)
from aes_lib.learner.base_model import bundled_base_model
from aes_lib.learner.batcher import BatcherState
from aes_lib.service import Context, Service
from aes_proto import subjects
from aes_proto.messages import BlobRef, LearnerStats, PolicyName, PolicyVersion, TrajectoryRef
from aes_proto.records import LEARNER_BUCKET

log = logging.getLogger(__name__)


class LearnerState(msgspec.Struct, kw_only=True):
    """Everything a restarted learner resumes from (stored in the blob store)."""

    policy: PolicyVersion | None = None
    """Latest published version (None: still the base weights)."""
    optimizer: BlobRef | None = None
    """AdamW moments after that version's update."""
    solver_updates: int = 0
    stale_dropped: int = 0
    """Samples dropped for policy lag since the last update."""
    batcher: BatcherState = msgspec.field(default_factory=BatcherState)
    held: list[TrajectoryRef] = []
    """Samples not yet trained, dropped or evicted, in arrival order."""


class LearnerService(Service[TrajectoryRef]):
    name = "learner"
    subject = subjects.TRAJECTORIES
    message_type = TrajectoryRef
    ack_wait = 120.0
    budget = 3600.0
    """One trajectory in; an optimizer step on CPU with a full batch may take many minutes."""
    policy: ClassVar[PolicyName] = "shared"
    """Which policy this learner trains: ``shared`` takes both roles' samples."""

    def __init__(self, config: LearnerConfig | None = None, run_id: str | None = None) -> None:
        self.config = config
        self.run_id = run_id or self.name
        self.version = 0
        self._state_ref: BlobRef | None = None

    @property
    def prefix(self) -> str:
        assert self.config is not None
        base = self.config.checkpoint_prefix
        return base if self.policy == "shared" else f"{base}-{self.policy}"

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
        self.base_model = path.name
        self.trainer = DppoTrainer(model, cfg)
        self.state = await self._load_state(ctx)
        self.held: dict[str, TrajectoryRef] = {}
        samples = []
        for ref in self.state.held:
            self.held[ref.rollout_id] = ref
            samples.append(await asyncio.to_thread(self._sample, ctx, ref))
        self.batcher = Batcher.restore(cfg, self.state.batcher, samples)
        if (pv := self.state.policy) is not None:
            await asyncio.to_thread(load_checkpoint, ctx.blobs, pv.checkpoint, model)
            self.version = pv.version
        if self.state.optimizer is not None:
            data = await asyncio.to_thread(ctx.blobs.get_bytes, self.state.optimizer)
            self.trainer.optimizer.load_state_dict(torch.load(io.BytesIO(data), weights_only=True))
        if self.version or samples:
            log.info("resumed %s at policy version %d holding %d samples", self.run_id, self.version, len(samples))

    async def _load_state(self, ctx: Context) -> LearnerState:
        from nats.js.errors import KeyNotFoundError

        try:
            entry = await (await ctx.kv(LEARNER_BUCKET)).get(self.run_id)
        except KeyNotFoundError:
            return LearnerState()
        ref = self._state_ref = msgspec.json.decode(entry.value, type=BlobRef)
        return msgspec.msgpack.decode(await asyncio.to_thread(ctx.blobs.get_bytes, ref), type=LearnerState)

    async def _save_state(self, ctx: Context) -> None:
        held = self.batcher.held()
        self.held = {rid: ref for rid, ref in self.held.items() if rid in held}
        self.state.batcher = self.batcher.snapshot()
        self.state.held = list(self.held.values())
        data = msgspec.msgpack.encode(self.state)
        ref = await asyncio.to_thread(ctx.blobs.put_content, f"learner/{self.run_id}/state", data)
        await (await ctx.kv(LEARNER_BUCKET)).put(self.run_id, msgspec.json.encode(ref))
        if self._state_ref is not None and self._state_ref.key != ref.key:
            await asyncio.to_thread(ctx.blobs.delete, self._state_ref.key)
        self._state_ref = ref

    @staticmethod
    def _sample(ctx: Context, msg: TrajectoryRef) -> Sample:
        traj = load_trajectory(ctx.blobs, msg.trajectory)
        return Sample(msg.rollout_id, msg.group_id, msg.role, msg.reward, turns_from_trajectory(traj),
                      finished=msg.finished, policy_version=msg.policy_version, group_size=msg.group_size,
                      final=msg.final)

    async def handle(self, msg: TrajectoryRef, ctx: Context) -> None:
        assert self.config is not None
        min_version = self.version - self.config.max_policy_lag
        if msg.policy_version < max(min_version, 0):  # UNKNOWN_VERSION (-1): its age cannot be bounded
            if msg.rollout_id not in self.held:
                log.info("sample dropped", extra={"reason": "stale" if msg.policy_version >= 0 else "unknown_version",
                                                  "rollout_id": msg.rollout_id,
                                                  "policy_version": msg.policy_version, "min_version": min_version})
                self.state.stale_dropped += 1
                await self._save_state(ctx)
            return
        sample = await asyncio.to_thread(self._sample, ctx, msg)
        if self.batcher.add(sample):
            self.held[msg.rollout_id] = msg
        while (batch := self.batcher.next_batch(min_version)) is not None:
            await self._update(batch, ctx)
            min_version = self.version - self.config.max_policy_lag
        await self._save_state(ctx)

    async def _update(self, batch, ctx: Context) -> None:
        assert self.config is not None
        t0 = time.monotonic()
        stats = await asyncio.to_thread(self.trainer.step, batch)
        seconds = time.monotonic() - t0
        self.version += 1
        self.state.solver_updates += batch.role == "solver"
        previous_optimizer = self.state.optimizer
        buf = io.BytesIO()
        torch.save(self.trainer.optimizer.state_dict(), buf)
        self.state.optimizer = await asyncio.to_thread(
            ctx.blobs.put_bytes, f"{self.prefix}/optimizer-v{self.version:06d}.pt", buf.getvalue())
        pv = await publish_policy(ctx, self.trainer.model, version=self.version, step=self.version,
                                  prefix=self.prefix, base_model=self.base_model, run_id=self.run_id,
                                  policy=self.policy, solver_updates=self.state.solver_updates,
                                  trained_role=batch.role)
        self.state.policy = pv
        await ctx.publish(subjects.LEARNER_STATS, LearnerStats(
            idempotency_key=f"{self.run_id}:stats:{self.version}", episode_id=self.run_id,
            step=self.version, policy_version=self.version, loss=stats.loss, mean_reward=batch.mean_reward,
            mask_fraction=stats.mask_fraction, mean_divergence=stats.mean_divergence,
            groups_used=len(batch.groups), groups_dropped=batch.dropped + batch.evicted + batch.stale,
            tokens=stats.tokens, carried_over=batch.carried_over, masked_tokens=stats.masked_tokens,
            role=batch.role, grad_norm=stats.grad_norm, seconds=seconds, policy=self.policy,
            group_ids=tuple(g.group_id for g in batch.groups), stale_dropped=self.state.stale_dropped,
        ))
        self.state.stale_dropped = 0
        await self._save_state(ctx)
        if previous_optimizer is not None:  # the saved state points at the new moments now
            await asyncio.to_thread(ctx.blobs.delete, previous_optimizer.key)
        if (keep := self.config.keep_checkpoints) and self.version > keep:
            await asyncio.to_thread(ctx.blobs.delete, checkpoint_key(self.prefix, self.version - keep))
        log.info("weights published", extra={
            "policy": self.policy, "version": self.version, "role": batch.role, "loss": stats.loss,
            "mean_reward": batch.mean_reward, "groups": len(batch.groups), "masked_tokens": stats.masked_tokens,
            "tokens": stats.tokens, "divergence": stats.mean_divergence, "seconds": seconds})


class SolverLearnerService(LearnerService):
    """Separate models: trains the solver's policy on solver samples only."""

    name = "learner-solver"
    subject = subjects.trajectory("solver")
    policy = "solver"


class ProposerLearnerService(LearnerService):
    """Separate models: trains the proposer's policy on proposer samples only."""

    name = "learner-proposer"
    subject = subjects.trajectory("proposer")
    policy = "proposer"
