"""Novelty gate: a candidate must not be a near-copy of its parent or of a task in the pool.

For each candidate on ``aes.candidate.novelty``: the MinHash signature of its instruction, tests
and files (``aes_lib.contamination.novelty``) against its parent's and every active pool task's,
each read once and kept in KV (``NOVELTY_BUCKET``), as the candidate's own is for later ones. The
verdict names the nearest task and the similarity per part. ``near_copy`` (similarity >=
``AES_NOVELTY_THRESHOLD``) rejects only with ``AES_NOVELTY_ENFORCE`` and then sends the candidate
back; by default it is recorded: a small proposer model's tasks are mostly its parent's, and
rejecting them all would admit nothing. ``aes status`` shows the pool's diversity from the same
signatures.
"""

from __future__ import annotations

import asyncio
import dataclasses

from aes_proto.messages import CandidateEnv, Verdict
from aes_proto.records import NOVELTY_BUCKET, POOL_BUCKET

from aes_lib.bundle import Task
from aes_lib.bus import kv as kvs
from aes_lib.contamination.novelty import NoveltySettings, Signature, signature, signature_key, similarity
from aes_lib.gate import Gate, Judgement, enforced
from aes_lib.runners.pool_store import PoolStore
from aes_lib.service import Context

GATE = "novelty"


@dataclasses.dataclass(frozen=True)
class Nearest:
    env_id: str
    name: str
    parts: dict[str, float]
    parent: bool


class NoveltyGateService(Gate):
    stage = GATE
    ack_wait = 60.0
    budget = 600.0
    """Reading each pool task once (then its signature is kept)."""

    async def setup(self, ctx: Context) -> None:
        self.settings = NoveltySettings.from_env()

    async def judge(self, task: Task, candidate: CandidateEnv, ctx: Context) -> Judgement:
        kv = await ctx.kv(NOVELTY_BUCKET)
        own = await asyncio.to_thread(signature, task.root)
        await kvs.update(kv, signature_key(candidate.env_id), Signature, lambda old: old or own)
        pool = PoolStore(await ctx.kv(POOL_BUCKET))
        entries = {e.env_id: e for e in await pool.active_entries()}
        parent = candidate.lineage.parent_env_id
        if parent and parent not in entries and (p := await pool.entry(parent)) is not None:
            entries[parent] = p
        entries.pop(candidate.env_id, None)
        nearest: Nearest | None = None
        for env_id, entry in entries.items():
            other = await self._signature(kv, env_id, entry.bundle, ctx)
            if other is None:
                continue
            parts = similarity(own, other)
            if nearest is None or parts["overall"] > nearest.parts["overall"]:
                nearest = Nearest(env_id, entry.name or env_id[:12], parts, env_id == parent)
        return Judgement(self.verdict(nearest, len(entries)), nearest)

    async def _signature(self, kv, env_id: str, bundle, ctx: Context) -> Signature | None:
        if (known := await kvs.read(kv, signature_key(env_id), Signature)) is not None:
            return known
        lease = await self.lease(env_id, bundle, ctx)
        if isinstance(lease, Judgement):
            return None  # a pool task whose bundle no longer reads says nothing about this one
        try:
            sig = await asyncio.to_thread(signature, lease.task.root)
        finally:
            await asyncio.to_thread(lease.release)
        return await kvs.update(kv, signature_key(env_id), Signature, lambda old: old or sig)

    def verdict(self, nearest: Nearest | None, compared: int) -> Verdict:
        if nearest is None:
            return Verdict(stage=GATE, ok=True, reason="ok", detail=f"nothing to compare with ({compared} pool tasks)")
        parts = ", ".join(f"{k} {v:.2f}" for k, v in nearest.parts.items() if k != "overall")
        who = f"{'its parent ' if nearest.parent else ''}{nearest.name} ({nearest.env_id[:12]})"
        detail = (f"nearest of {compared}: {who}, similarity {nearest.parts['overall']:.2f} ({parts}); "
                  f"near-copy at >= {self.settings.threshold:.2f}")
        if nearest.parts["overall"] < self.settings.threshold:
            return Verdict(stage=GATE, ok=True, reason="ok", detail=detail)
        return enforced(GATE, False, "near_copy", detail, self.settings.enforce, "AES_NOVELTY_ENFORCE")

    def feedback(self, judgement: Judgement) -> str:
        return ("The task is a near-copy of one the pool has: change what it asks (a new requirement, other data, "
                "another tool or failure mode), not only its wording.")
