"""Contamination gate: reject a candidate whose instruction shares a 13-gram with a held-out task.

The held-out index is the one registered with ``aes contamination index SRC``; it
is re-read whenever the registration changes. Without any registered index the
gate passes candidates with reason ``no_index`` (recorded in the verdict), so a
stack without a held-out benchmark copy still runs and the gap stays visible.
"""

from __future__ import annotations

import logging

from aes_proto import subjects
from aes_proto.messages import BlobRef, CandidateEnv, ContaminationResult, Verdict

from aes_lib import faults
from aes_lib.bundle import Task
from aes_lib.contamination import DEFAULT_N, KV_BUCKET, Match, NgramIndex, load_index, registered
from aes_lib.gate import Gate, Judgement
from aes_lib.service import Context

GATE = "contamination"
log = logging.getLogger(__name__)


class ContaminationService(Gate):
    stage = GATE
    budget = 300.0

    def __init__(self) -> None:
        self._ref: BlobRef | None = None
        self._index: NgramIndex | None = None

    async def _current_index(self, ctx: Context) -> NgramIndex | None:
        ref = await registered(await ctx.kv(KV_BUCKET))
        if ref != self._ref:
            self._index = None if ref is None else await faults.call(
                load_index, ctx.blobs, ref, deadline=ctx.settings.io_deadline, what=f"{GATE}: read index {ref.key}")
            self._ref = ref
            log.info("contamination index: %s", ref.key if ref else "none registered")
        return self._index

    async def judge(self, task: Task, candidate: CandidateEnv, ctx: Context) -> Judgement:
        index = await self._current_index(ctx)
        verdict, match = verdict_of(index, task.instruction)
        return Judgement(verdict, (index, match))

    def facts(self, judgement: Judgement) -> dict[str, object]:
        _, match = judgement.evidence or (None, None)
        overlap = {"heldout_task": match.heldout_id, "ngram": match.ngram} if match else {}
        return {"index": self._ref.key if self._ref else "", **overlap}

    async def record(self, candidate: CandidateEnv, judgement: Judgement, ctx: Context) -> None:
        index, match = judgement.evidence or (self._index, None)
        await ctx.publish(
            subjects.RESULT_CONTAMINATION,
            ContaminationResult(
                idempotency_key=f"{candidate.idempotency_key}:{GATE}", episode_id=candidate.episode_id,
                env_id=candidate.env_id, ok=judgement.verdict.ok, matched_ngram=match.ngram if match else "",
                heldout_task=match.heldout_id if match else "", n=index.n if index else DEFAULT_N,
            ),
        )


def verdict_of(index: NgramIndex | None, instruction: str) -> tuple[Verdict, Match | None]:
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
