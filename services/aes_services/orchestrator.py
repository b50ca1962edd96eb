"""Orchestrator: scored trajectories in, packed updates (``TrainBatch``) out, for the trainer.

Consumes ``TrajectoryRef`` (every role's with the shared policy; one role's with separate
models), loads each trajectory and hands its tokenized turns to the batcher, which groups
them, drops groups without a reward spread or holding samples older than ``max_policy_lag``
versions, and centres the rewards into advantages. Each full batch is turned into training
sequences (turns that extend each other merged), split into one share per trainer rank
(``AES_LEARNER_NPROC``), cut into micro-batches and written once to the blob store as flat
token arrays (``aes_lib.learner.packing``); one ``TrainBatch`` names them. Batch ids run
1, 2, ... and are the policy versions the trainer publishes, so the staleness bound here is
against the version the next update makes.

Durability, cheaply. A sample's message is acked once its ref is in the ``ORCHESTRATOR_BUCKET``
KV (one small put per message, deleted once its group is batched, dropped or evicted;
nothing is rewritten). A restarted orchestrator lists those refs (in arrival order: KV
revisions), re-reads their trajectories -- the pending samples only; a trained one is never
read again, by anyone -- and takes its last batch id and that batch's groups from the last
``TrainBatch`` on its subject: a crash between publishing a batch and deleting its refs
leaves refs of groups that batch closed, and they are deleted, not batched again.

Why not leave the samples unacked until their batch is out (JetStream redelivers them after a
crash)? An incomplete group may wait for many updates: its messages would count against the
consumer's ``max_ack_pending`` (a full window of waiting samples stops delivery, so the group
that would complete never arrives), every restart would count a delivery towards
dead-lettering a sample that did nothing wrong, and the consumer would never look idle.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import ClassVar

import msgspec
from nats.js.errors import NotFoundError

from aes_lib.agents.trajectory import load_trajectory
from aes_lib.bus.streams import stream_for
from aes_lib.learner import Batch, Batcher, LearnerConfig, Sample, pack_turns, turns_from_trajectory
from aes_lib.learner.packing import write_batch
from aes_lib.service import Context, Service
from aes_proto import subjects
from aes_proto.codec import decode
from aes_proto.messages import PolicyName, TrainBatch, TrajectoryRef
from aes_proto.records import ORCHESTRATOR_BUCKET

log = logging.getLogger(__name__)


class OrchestratorService(Service[TrajectoryRef]):
    name = "orchestrator"
    subject = subjects.TRAJECTORIES
    message_type = TrajectoryRef
    ack_wait = 60.0
    policy: ClassVar[PolicyName] = "shared"
    """Which policy's updates it packs: ``shared`` takes both roles' samples."""

    def __init__(self, config: LearnerConfig | None = None, run_id: str | None = None) -> None:
        self.config = config
        self.run_id = run_id or self.name
        self.batch_id = 0
        """The last batch published (the policy version the trainer reaches with it)."""
        self.stale_dropped = 0
        self.held: dict[str, str] = {}
        """Rollout id -> its KV key, for every sample the batcher holds."""

    def _key(self, rollout_id: str) -> str:
        return f"{self.run_id}.{hashlib.sha256(rollout_id.encode()).hexdigest()[:32]}"

    async def setup(self, ctx: Context) -> None:
        cfg = self.config = self.config or LearnerConfig.from_env()
        self.kv = await ctx.kv(ORCHESTRATOR_BUCKET)
        closed: tuple[str, ...] = ()
        out = subjects.train_batch(self.policy)
        try:
            last = decode((await ctx.js.get_last_msg(stream_for(out), out)).data, TrainBatch)
            self.batch_id, closed = last.batch_id, last.group_ids
        except NotFoundError:
            pass
        entries = []
        for key in await self._keys():
            entry = await self.kv.get(key)
            entries.append((entry.revision, key, msgspec.msgpack.decode(entry.value, type=TrajectoryRef)))
        samples = []
        for _, key, ref in sorted(entries, key=lambda e: e[0]):  # arrival order
            if ref.group_id in closed:  # batched just before a crash: its refs were not deleted yet
                await self.kv.delete(key)
                continue
            self.held[ref.rollout_id] = key
            samples.append(await asyncio.to_thread(self._sample, ctx, ref))
        self.batcher = Batcher.resume(cfg, self.batch_id, closed, samples)
        if self.batch_id or samples:
            log.info("resumed %s after batch %d holding %d samples", self.run_id, self.batch_id, len(samples))
        await self._cut(ctx)

    async def _keys(self) -> list[str]:
        from nats.js.errors import NoKeysError

        try:
            return [k for k in await self.kv.keys() if k.startswith(f"{self.run_id}.")]
        except NoKeysError:
            return []

    @staticmethod
    def _sample(ctx: Context, msg: TrajectoryRef) -> Sample:
        traj = load_trajectory(ctx.blobs, msg.trajectory)
        return Sample(msg.rollout_id, msg.group_id, msg.role, msg.reward, turns_from_trajectory(traj),
                      finished=msg.finished, policy_version=msg.policy_version, group_size=msg.group_size,
                      final=msg.final, screened=msg.screened)

    def _min_version(self) -> int:
        assert self.config is not None
        return self.batch_id - self.config.max_policy_lag

    async def handle(self, msg: TrajectoryRef, ctx: Context) -> None:
        min_version = self._min_version()
        if msg.policy_version < max(min_version, 0):  # UNKNOWN_VERSION (-1): its age cannot be bounded
            if msg.rollout_id not in self.held:
                log.info("sample dropped", extra={"reason": "stale" if msg.policy_version >= 0 else "unknown_version",
                                                  "rollout_id": msg.rollout_id,
                                                  "policy_version": msg.policy_version, "min_version": min_version})
                self.stale_dropped += 1
            return
        sample = await asyncio.to_thread(self._sample, ctx, msg)
        if self.batcher.add(sample):
            key = self._key(msg.rollout_id)
            await self.kv.put(key, msgspec.msgpack.encode(msg))  # a later version of the rollout replaces it
            self.held[msg.rollout_id] = key
        await self._cut(ctx)

    async def _cut(self, ctx: Context) -> None:
        """Publish every full batch, then forget the refs the batcher no longer holds."""
        while (batch := self.batcher.next_batch(self._min_version())) is not None:
            await self._publish(batch, ctx)
            await self._forget()
        await self._forget()

    async def _forget(self) -> None:
        held = self.batcher.held()
        for rid in [r for r in self.held if r not in held]:
            await self.kv.delete(self.held.pop(rid))

    async def _publish(self, batch: Batch, ctx: Context) -> None:
        cfg = self.config
        assert cfg is not None
        batch_id = self.batch_id + 1
        seqs = [s for sample, adv in batch.samples for s in pack_turns(sample.turns, adv, cfg.merge_turns)]
        packed = await asyncio.to_thread(write_batch, ctx.blobs, f"train-batches/{self.run_id}/{batch_id:08d}",
                                         seqs, cfg.nproc, cfg.micro_batch_tokens)
        await ctx.publish(subjects.train_batch(self.policy), TrainBatch(
            idempotency_key=f"{self.run_id}:batch:{batch_id}", episode_id=self.run_id, batch_id=batch_id,
            policy=self.policy, role=batch.role,  # type: ignore[arg-type]  # the batcher checked it
            shares=packed.shares, share_micro=packed.share_micro, n_tokens=packed.n_tokens,
            group_ids=tuple(g.group_id for g in batch.groups), mean_reward=batch.mean_reward,
            groups_dropped=batch.dropped + batch.evicted + batch.stale, carried_over=batch.carried_over,
            stale_dropped=self.stale_dropped, screened=batch.screened))
        self.batch_id, self.stale_dropped = batch_id, 0
        log.info("batch packed", extra={"policy": self.policy, "batch_id": batch_id, "role": batch.role,
                                        "groups": len(batch.groups), "tokens": packed.n_tokens,
                                        "shares": len(packed.shares), "sequences": len(seqs)})


class SolverOrchestratorService(OrchestratorService):
    """Separate models: packs the solver policy's updates from solver samples only."""

    name = "orchestrator-solver"
    subject = subjects.trajectory("solver")
    policy = "solver"


class ProposerOrchestratorService(OrchestratorService):
    """Separate models: packs the proposer policy's updates from proposer samples only."""

    name = "orchestrator-proposer"
    subject = subjects.trajectory("proposer")
    policy = "proposer"
