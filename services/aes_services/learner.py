"""Learner: scored trajectories in, DPPO updates, new policy versions out.

Consumes ``TrajectoryRef`` (every role's with the shared policy; one role's with
separate models), loads each trajectory from the blob store and hands it to the
batcher. Whenever a batch is full it runs one DPPO update (in a worker thread, so
the runner keeps heart-beating) over every rank of the learner (``--nproc``: rank 0,
this service, drives the others, ``aes_lib.learner.distributed``), publishes the new
weights through the configured transport (``aes_lib.weights``: an HF-format folder, announced
with ``PolicyVersion``), and ``LearnerStats``.

Nothing acknowledged is lost to a crash, nor trained twice. Before a message is acked,
the learner's small state is written to the blob store and pointed to from KV: the
samples it holds (in arrival order), the groups it closed, its counters, and where its
weights come from: the last full training-state save (sharded weights and AdamW moments
through ``torch.distributed.checkpoint``, every ``checkpoint_every`` updates) plus the
log of the updates since (each one's trajectory refs and advantages, in batch order). A
restarted learner loads that save and replays the logged updates (deterministic: the same
batches in the same order), which rebuilds the weights and moments of the last announced
version without announcing anything again; then it restores the batcher from the held
samples. A redelivered sample of a closed group is ignored. Samples older than
``max_policy_lag`` versions are dropped and counted. A trajectory that cannot be trained on
raises ``TrajectoryFormatError`` and, after the runner's redeliveries, lands on the
dead-letter subject with that error.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from pathlib import Path
from typing import ClassVar

import msgspec

from aes_lib.agents.trajectory import load_trajectory
from aes_lib.checkpoints import delete_folder
from aes_lib.learner import (
    Batch,
    Batcher,
    Group,
    LearnerConfig,
    LearnerConfigError,
    Sample,
    turns_from_trajectory,
)
from aes_lib.learner.base_model import bundled_base_model
from aes_lib.learner.batcher import BatcherState
from aes_lib.learner.distributed import Ranks
from aes_lib.learner.runtime import LearnerRuntime
from aes_lib.service import Context, Service
from aes_lib.weights.transport import VersionMeta, publish_version, weight_transport
from aes_proto import subjects
from aes_proto.messages import BlobRef, LearnerStats, PolicyName, PolicyVersion, Role, TrajectoryRef
from aes_proto.records import LEARNER_BUCKET

log = logging.getLogger(__name__)


class LoggedUpdate(msgspec.Struct, kw_only=True):
    """One update since the last training-state save, as needed to replay it."""

    version: int
    role: Role
    samples: list[TrajectoryRef]
    advantages: list[float]


class LearnerState(msgspec.Struct, kw_only=True):
    """Everything a restarted learner resumes from (stored in the blob store)."""

    policy: PolicyVersion | None = None
    """Latest published version (None: still the base weights)."""
    published: list[BlobRef] = []
    """Manifests of the published versions still kept, oldest first."""
    train_state: str = ""
    """Folder of the last training-state save (empty: the base weights, fresh AdamW)."""
    train_version: int = 0
    """The version that save holds."""
    replay: list[LoggedUpdate] = []
    """Updates after ``train_version``, in order: replayed on top of the save after a crash."""
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
        self.runtime = LearnerRuntime()
        await self._call("build", cfg, str(path))
        self.base_model = path.name
        self.trainer = self.runtime.trainer
        self.state = await self._load_state(ctx)
        if self.state.train_state:
            await self._call("load", self.state.train_state)
        await asyncio.to_thread(self._forget_other_saves)
        self.version = self.state.train_version
        for update in self.state.replay:  # the updates after the save, as they ran
            samples = [await asyncio.to_thread(self._sample, ctx, ref) for ref in update.samples]
            group = Group("replay", update.role, tuple(samples), tuple(update.advantages))
            await self._call("step", self.trainer.plan(Batch(update.role, (group,), 0, 0, 0), self.ranks.world))
            self.version = update.version
        if self.version != (self.state.policy.version if self.state.policy else 0):
            raise RuntimeError(f"learner state of {self.run_id} rebuilds version {self.version}, "
                               f"but announced {self.state.policy.version if self.state.policy else 0}")
        self.held: dict[str, TrajectoryRef] = {}
        samples = []
        for ref in self.state.held:
            self.held[ref.rollout_id] = ref
            samples.append(await asyncio.to_thread(self._sample, ctx, ref))
        self.batcher = Batcher.restore(cfg, self.state.batcher, samples)
        if self.version or samples:
            log.info("resumed %s at policy version %d (saved at %d, %d replayed) holding %d samples", self.run_id,
                     self.version, self.state.train_version, len(self.state.replay), len(samples))

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

    async def _update(self, batch: Batch, ctx: Context) -> None:
        cfg = self.config
        assert cfg is not None and self.ranks is not None
        t0 = time.monotonic()
        stats = await self._call("step", self.trainer.plan(batch, self.ranks.world))
        seconds = time.monotonic() - t0
        self.version += 1
        state = self.state
        state.solver_updates += batch.role == "solver"
        pv = await publish_version(ctx, lambda folder: self._call("export", str(folder)), VersionMeta(
            version=self.version, prefix=self.prefix, base_model=self.base_model, run_id=self.run_id,
            policy=self.policy, solver_updates=state.solver_updates, trained_role=batch.role,
            keep=cfg.keep_checkpoints), model=self.runtime.model if self.ranks.world == 1 else None)
        state.policy = pv
        if pv.checkpoint is not None:  # the store's copies expire here; the filesystem transport keeps its own
            state.published.append(pv.checkpoint)
        previous_save = state.train_state
        if self.version - state.train_version >= cfg.checkpoint_every:
            folder = str(self.state_root / f"v{self.version:06d}")
            await self._call("save", folder)
            state.train_state, state.train_version, state.replay = folder, self.version, []
        else:
            samples = batch.samples
            state.replay.append(LoggedUpdate(version=self.version, role=batch.role,  # type: ignore[arg-type]
                                             samples=[self.held[s.rollout_id] for s, _ in samples],
                                             advantages=[a for _, a in samples]))
        await ctx.publish(subjects.LEARNER_STATS, LearnerStats(
            idempotency_key=f"{self.run_id}:stats:{self.version}", episode_id=self.run_id,
            step=self.version, policy_version=self.version, loss=stats.loss, mean_reward=batch.mean_reward,
            mask_fraction=stats.mask_fraction, mean_divergence=stats.mean_divergence,
            groups_used=len(batch.groups), groups_dropped=batch.dropped + batch.evicted + batch.stale,
            tokens=stats.tokens, carried_over=batch.carried_over, masked_tokens=stats.masked_tokens,
            role=batch.role, grad_norm=stats.grad_norm, seconds=seconds, policy=self.policy,
            group_ids=tuple(g.group_id for g in batch.groups), stale_dropped=state.stale_dropped,
            sequence_tokens=stats.sequence_tokens, ranks=self.ranks.world,
        ))
        state.stale_dropped = 0
        expired = state.published[: -cfg.keep_checkpoints] if cfg.keep_checkpoints else []
        state.published = state.published[len(expired):]
        await self._save_state(ctx)
        # Only now that the saved state points past them: the older save and the expired versions.
        if previous_save and previous_save != state.train_state:
            await asyncio.to_thread(shutil.rmtree, previous_save, True)
        for ref in expired:
            await asyncio.to_thread(delete_folder, ctx.blobs, ref)
        log.info("weights published", extra={
            "policy": self.policy, "version": self.version, "role": batch.role, "loss": stats.loss,
            "mean_reward": batch.mean_reward, "groups": len(batch.groups), "masked_tokens": stats.masked_tokens,
            "tokens": stats.tokens, "sequence_tokens": stats.sequence_tokens, "divergence": stats.mean_divergence,
            "seconds": seconds, "ranks": self.ranks.world})


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
