"""Learner, the trainer stage: packed updates (``TrainBatch``) in, DPPO steps, policy versions out.

Consumes the orchestrator's ``TrainBatch`` for its policy (``aes_services.orchestrator`` groups,
filters, computes advantages and packs). Each update runs in a worker thread, so the runner
keeps heart-beating, over every rank of the learner (``--nproc``: rank 0, this service, sends
the others the batch's share refs, ``aes_lib.learner.distributed``); each rank reads its own
packed share from the blob store. Then the new weights are published through the configured
transport (``aes_lib.weights``: an HF-format folder, announced with ``PolicyVersion``) as version
``batch_id``, and the step's ``LearnerStats``.

Exactly once, by batch id. The learner's small state (blob store, pointed to from KV; written
once per update, never per message) holds the last version it announced, which is the last
batch id it trained, and where its weights come from: the last full training-state save
(sharded weights and AdamW moments through ``torch.distributed.checkpoint``, every
``checkpoint_every`` updates) plus the ``TrainBatch`` messages trained since. A restarted
learner loads that save and steps those batches again from their packed shares (deterministic:
the same data in the same order), which rebuilds the weights and moments of the last
announced version without announcing anything again; it reads no trajectory. A redelivered
batch whose id is at most that version is acked untrained; one that arrives before its
predecessor is refused (redelivered later). The packed shares of a batch are deleted once a
save covers it.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from pathlib import Path
from typing import ClassVar

import msgspec

from aes_lib.checkpoints import delete_folder
from aes_lib.learner import LearnerConfig, LearnerConfigError
from aes_lib.learner.base_model import bundled_base_model
from aes_lib.learner.distributed import Ranks
from aes_lib.learner.runtime import LearnerRuntime
from aes_lib.learner.trainer import StepStats
from aes_lib.service import Context, Service
from aes_lib.weights.publish import publish_version, weight_transport
from aes_lib.weights.transport import VersionMeta
from aes_proto import subjects
from aes_proto.messages import BlobRef, LearnerStats, PolicyName, PolicyVersion, TrainBatch
from aes_proto.records import LEARNER_BUCKET

log = logging.getLogger(__name__)


class BatchOrderError(RuntimeError):
    """A batch whose predecessor was not trained yet (redelivered out of order): retried later."""


class LearnerState(msgspec.Struct, kw_only=True):
    """Everything a restarted learner resumes from (stored in the blob store)."""

    policy: PolicyVersion | None = None
    """Latest published version, i.e. the last batch trained (None: still the base weights)."""
    published: list[BlobRef] = []
    """Manifests of the published versions still kept, oldest first."""
    train_state: str = ""
    """Folder of the last training-state save (empty: the base weights, fresh AdamW)."""
    train_version: int = 0
    """The version that save holds."""
    replay: list[TrainBatch] = []
    """Batches trained after ``train_version``, in order: stepped again on top of the save after a crash."""
    solver_updates: int = 0


class LearnerService(Service[TrainBatch]):
    name = "learner"
    subject = subjects.train_batch("shared")
    message_type = TrainBatch
    ack_wait = 120.0
    budget = 3600.0
    """One batch in; an optimizer step on CPU with a full batch may take many minutes."""
    policy: ClassVar[PolicyName] = "shared"
    """Which policy this learner trains (its orchestrator packs that policy's batches)."""
    ranks: Ranks | None = None
    """Every rank of this learner (set by the rank launcher; None: this process alone)."""

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
        cfg = self.config = self.config or LearnerConfig.from_env()
        if cfg.model_path:
            path = Path(cfg.model_path)
            if not (path / "config.json").is_file():
                raise LearnerConfigError(f"AES_LEARNER_MODEL_PATH must be a transformers model folder, got {path}")
        else:
            path = await asyncio.to_thread(bundled_base_model, ctx.settings.home)
        self.state_root = Path(cfg.checkpoint_dir or ctx.settings.home / "learner") / self.run_id / self.prefix
        weight_transport(ctx.settings)  # refuses one that cannot work here before any training
        self.ranks = self.ranks or Ranks()
        self.runtime = LearnerRuntime(ctx.blobs)
        await self._call("build", cfg, str(path))
        self.base_model = path.name
        self.trainer = self.runtime.trainer
        self.state = await self._load_state(ctx)
        if self.state.train_state:
            await self._call("load", self.state.train_state)
        await asyncio.to_thread(self._forget_other_saves)
        self.version = self.state.train_version
        for batch in self.state.replay:  # the batches after the save, as they ran
            await self._step(batch)
            self.version = batch.batch_id
        if self.version != (self.state.policy.version if self.state.policy else 0):
            raise RuntimeError(f"learner state of {self.run_id} rebuilds version {self.version}, "
                               f"but announced {self.state.policy.version if self.state.policy else 0}")
        if self.version:
            log.info("resumed %s at policy version %d (saved at %d, %d replayed)", self.run_id, self.version,
                     self.state.train_version, len(self.state.replay))

    def _forget_other_saves(self) -> None:
        """Saves the state does not point at (a crash came between a save and the state's update)."""
        if self.state_root.is_dir():
            for old in self.state_root.iterdir():
                if str(old) != self.state.train_state:
                    shutil.rmtree(old, ignore_errors=True)

    async def _call(self, name: str, *args):
        """Run a collective operation of the runtime on every rank (in a thread: the bus stays served)."""
        assert self.ranks is not None
        return await asyncio.to_thread(self.ranks.call, self.runtime, name, *args)

    async def _step(self, batch: TrainBatch) -> StepStats:
        """One update on every rank; each reads its own share (only the refs travel)."""
        return await self._call("step", batch.shares, batch.share_micro, batch.n_tokens)

    async def _load_state(self, ctx: Context) -> LearnerState:
        from nats.js.errors import KeyNotFoundError

        try:
            entry = await (await ctx.kv(LEARNER_BUCKET)).get(self.run_id)
        except KeyNotFoundError:
            return LearnerState()
        ref = self._state_ref = msgspec.json.decode(entry.value, type=BlobRef)
        data = await asyncio.to_thread(ctx.blobs.get_bytes, ref)
        try:
            return msgspec.msgpack.decode(data, type=LearnerState)
        except msgspec.ValidationError as e:  # e.g. a replay log of trajectory refs, from before the orchestrator
            raise LearnerConfigError(
                f"learner state of {self.run_id} ({ref.key}) is not this learner's format ({e}); it logs "
                f"updates as TrainBatch messages now: start a new run id or delete key {self.run_id!r} of KV "
                f"bucket {LEARNER_BUCKET}") from None

    async def _save_state(self, ctx: Context) -> None:
        data = msgspec.msgpack.encode(self.state)
        ref = await asyncio.to_thread(ctx.blobs.put_content, f"learner/{self.run_id}/state", data)
        await (await ctx.kv(LEARNER_BUCKET)).put(self.run_id, msgspec.json.encode(ref))
        if self._state_ref is not None and self._state_ref.key != ref.key:
            await asyncio.to_thread(ctx.blobs.delete, self._state_ref.key)
        self._state_ref = ref

    async def handle(self, msg: TrainBatch, ctx: Context) -> None:
        if msg.batch_id <= self.version:
            log.info("batch already trained", extra={"batch_id": msg.batch_id, "version": self.version})
            return
        if msg.batch_id != self.version + 1:
            raise BatchOrderError(f"batch {msg.batch_id} arrived before batch {self.version + 1}")
        await self._update(msg, ctx)

    async def _publish(self, ctx: Context, batch: TrainBatch) -> PolicyVersion:
        """The trained weights out as version ``self.version`` (one call: how they travel is the weights unit's)."""
        assert self.config is not None and self.ranks is not None
        return await publish_version(ctx, lambda folder: self._call("export", str(folder)), VersionMeta(
            version=self.version, prefix=self.prefix, base_model=self.base_model, run_id=self.run_id,
            policy=self.policy, solver_updates=self.state.solver_updates, trained_role=batch.role,
            keep=self.config.keep_checkpoints), model=self.runtime.model if self.ranks.world == 1 else None)

    async def _update(self, batch: TrainBatch, ctx: Context) -> None:
        cfg = self.config
        assert cfg is not None and self.ranks is not None
        t0 = time.monotonic()
        stats = await self._step(batch)
        seconds = time.monotonic() - t0
        self.version = batch.batch_id
        state = self.state
        state.solver_updates += batch.role == "solver"
        pv = await self._publish(ctx, batch)
        state.policy = pv
        if pv.checkpoint is not None:  # the store's copies expire here; the filesystem transport keeps its own
            state.published.append(pv.checkpoint)
        previous_save = state.train_state
        covered: list[TrainBatch] = []
        if self.version - state.train_version >= cfg.checkpoint_every:
            folder = str(self.state_root / f"v{self.version:06d}")
            await self._call("save", folder)
            covered = [*state.replay, batch]
            state.train_state, state.train_version, state.replay = folder, self.version, []
        else:
            state.replay.append(batch)
        await ctx.publish(subjects.LEARNER_STATS, LearnerStats(
            idempotency_key=f"{self.run_id}:stats:{self.version}", episode_id=self.run_id,
            step=self.version, policy_version=self.version, loss=stats.loss, mean_reward=batch.mean_reward,
            mask_fraction=stats.mask_fraction, mean_divergence=stats.mean_divergence,
            groups_used=len(batch.group_ids), groups_dropped=batch.groups_dropped,
            tokens=stats.tokens, carried_over=batch.carried_over, masked_tokens=stats.masked_tokens,
            role=batch.role, grad_norm=stats.grad_norm, seconds=seconds, policy=self.policy,
            group_ids=batch.group_ids, stale_dropped=batch.stale_dropped, screened=batch.screened,
            sequence_tokens=stats.sequence_tokens, ranks=self.ranks.world,
        ))
        expired = state.published[: -cfg.keep_checkpoints] if cfg.keep_checkpoints else []
        state.published = state.published[len(expired):]
        await self._save_state(ctx)
        # Only now that the saved state points past them: the older save, the expired versions
        # and the packed batches the new save covers.
        if previous_save and previous_save != state.train_state:
            await asyncio.to_thread(shutil.rmtree, previous_save, True)
        for ref in expired:
            await asyncio.to_thread(delete_folder, ctx.blobs, ref)
        for done in covered:
            for share in done.shares:
                await asyncio.to_thread(ctx.blobs.delete, share.key)
        log.info("weights published", extra={
            "policy": self.policy, "version": self.version, "role": batch.role, "loss": stats.loss,
            "mean_reward": batch.mean_reward, "groups": len(batch.group_ids), "masked_tokens": stats.masked_tokens,
            "tokens": stats.tokens, "sequence_tokens": stats.sequence_tokens, "divergence": stats.mean_divergence,
            "seconds": seconds, "ranks": self.ranks.world})


class SolverLearnerService(LearnerService):
    """Separate models: trains the solver's policy on solver samples only."""

    name = "learner-solver"
    subject = subjects.train_batch("solver")
    policy = "solver"


class ProposerLearnerService(LearnerService):
    """Separate models: trains the proposer's policy on proposer samples only."""

    name = "learner-proposer"
    subject = subjects.train_batch("proposer")
    policy = "proposer"
