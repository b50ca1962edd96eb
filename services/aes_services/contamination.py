"""Contamination gate: reject a candidate whose instruction shares a 13-gram with a held-out task.

The held-out index is the one registered with ``aes contamination index SRC``; it
is re-read whenever the registration changes. Without any registered index the
gate passes candidates with reason ``no_index`` (recorded in the verdict), so a
stack without a held-out benchmark copy still runs and the gap stays visible.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile

from aes_proto import subjects
from aes_proto.messages import BlobRef, CandidateEnv, ContaminationResult, Verdict

from aes_lib.admission import forward, reject
from aes_lib.bundle import BundleError, unpack
from aes_lib.contamination import DEFAULT_N, KV_BUCKET, Match, NgramIndex, load_index, registered
from aes_lib.service import Context, Service

GATE = "contamination"
log = logging.getLogger(__name__)


def _instruction(data: bytes) -> str:
    with tempfile.TemporaryDirectory(prefix="aes-contamination-") as tmp:
        return unpack(data, tmp).instruction


class ContaminationService(Service[CandidateEnv]):
    name = GATE
    subject = subjects.stage(GATE)
    message_type = CandidateEnv

    def __init__(self) -> None:
        self._ref: BlobRef | None = None
        self._index: NgramIndex | None = None

    async def _current_index(self, ctx: Context) -> NgramIndex | None:
        ref = await registered(await ctx.kv(KV_BUCKET))
        if ref != self._ref:
            self._index = None if ref is None else await asyncio.to_thread(load_index, ctx.blobs, ref)
            self._ref = ref
            log.info("contamination index: %s", ref.key if ref else "none registered")
        return self._index

    async def handle(self, msg: CandidateEnv, ctx: Context) -> None:
        index = await self._current_index(ctx)
        data = await asyncio.to_thread(ctx.blobs.get_bytes, msg.bundle)
        try:
            instruction = await asyncio.to_thread(_instruction, data)
        except BundleError as e:
            verdict, match = Verdict(stage=GATE, ok=False, reason="invalid_bundle", detail=str(e)), None
        else:
            verdict, match = judge(index, instruction)
        await ctx.publish(
            subjects.RESULT_CONTAMINATION,
            ContaminationResult(
                idempotency_key=f"{msg.idempotency_key}:{GATE}", episode_id=msg.episode_id, env_id=msg.env_id,
                ok=verdict.ok, matched_ngram=match.ngram if match else "",
                heldout_task=match.heldout_id if match else "", n=index.n if index else DEFAULT_N,
            ),
        )
        if verdict.ok:
            await forward(ctx, msg, verdict)
        else:
            await reject(ctx, msg, verdict)


def judge(index: NgramIndex | None, instruction: str) -> tuple[Verdict, Match | None]:
    """The gate's verdict on one instruction, and the shared n-gram when there is one."""
    if index is None:
        detail = "no held-out index registered: run `aes contamination index SRC`"
        return Verdict(stage=GATE, ok=True, reason="no_index", detail=detail), None
    match = index.check(instruction)
    if match is None:
        detail = f"no {index.n}-gram shared with {len(index.doc_ids)} held-out tasks"
        return Verdict(stage=GATE, ok=True, reason="ok", detail=detail), None
    detail = f"shares the {index.n}-gram {match.ngram!r} with held-out task {match.heldout_id}"
    return Verdict(stage=GATE, ok=False, reason="contaminated", detail=detail), match
