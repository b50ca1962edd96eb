"""Contamination gate: reject a candidate whose instruction shares a 13-gram with a held-out task.

It judges the instruction the candidate carries (``CandidateEnv.instruction``) and reads the
bundle only for a candidate without one.

The held-out index is the registered one: the bundled Terminal-Bench index that ``aes up``
registers, or the user's own from ``aes contamination index SRC``; it is re-read whenever
the registration changes. Without any registered index the gate
fails closed: it rejects every candidate (``no_heldout_index``, never sent back for
revision: no revision could pass) unless ``AES_CONTAMINATION_REQUIRED=0``, which
passes them with reason ``no_index`` (recorded in the verdict; ``aes health`` and
``aes status`` warn).
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
NO_HELDOUT_INDEX = "no_heldout_index"
NO_INDEX_HELP = ("no held-out index registered: register a held-out index with `aes contamination index SRC`, "
                 "or set AES_CONTAMINATION_REQUIRED=0 to run without one")
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

    async def judge_message(self, candidate: CandidateEnv, ctx: Context) -> Judgement | None:
        # The instruction travels on the candidate: no bundle to read (None: an older message).
        return await self._checked(candidate.instruction, ctx) if candidate.instruction else None

    async def judge(self, task: Task, candidate: CandidateEnv, ctx: Context) -> Judgement:
        return await self._checked(task.instruction, ctx)

    async def _checked(self, instruction: str, ctx: Context) -> Judgement:
        index = await self._current_index(ctx)
        verdict, match = verdict_of(index, instruction, ctx.settings.contamination_required)
        return Judgement(verdict, (index, match))

    def facts(self, judgement: Judgement) -> dict[str, object]:
        _, match = judgement.evidence or (None, None)
        overlap = {"heldout_task": match.heldout_id, "ngram": match.ngram} if match else {}
        return {"index": self._ref.key if self._ref else "", **overlap}

    def feedback(self, judgement: Judgement) -> str | None:
        # The deployment's gap, not the candidate's fault: a revision would be rejected the same way.
        return None if judgement.verdict.reason == NO_HELDOUT_INDEX else ""

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


def verdict_of(index: NgramIndex | None, instruction: str, required: bool) -> tuple[Verdict, Match | None]:
    """The gate's verdict on one instruction, and the shared n-gram when there is one.
    Without an index: a rejection when one is ``required``, else a pass saying it was unchecked."""
    if index is None and required:
        return Verdict(stage=GATE, ok=False, reason=NO_HELDOUT_INDEX, detail=NO_INDEX_HELP), None
    if index is None:
        detail = "unchecked: no held-out index registered and AES_CONTAMINATION_REQUIRED=0"
        return Verdict(stage=GATE, ok=True, reason="no_index", detail=detail), None
    match = index.check(instruction)
    if match is None:
        detail = f"no {index.n}-gram shared with {len(index.doc_ids)} held-out tasks"
        return Verdict(stage=GATE, ok=True, reason="ok", detail=detail), None
    detail = f"shares the {index.n}-gram {match.ngram!r} with held-out task {match.heldout_id}"
    return Verdict(stage=GATE, ok=False, reason="contaminated", detail=detail), match
