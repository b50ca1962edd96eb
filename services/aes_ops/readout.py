"""Reading the flywheel's state off the bus: result history, the pool, and the admission
checks the deployment runs weaker than the paper's."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable
from typing import TypeVar

from aes_proto import subjects
from aes_proto.messages import BlobRef, CalibrationResult, DeadLetter, Message, PoolEvent, RolloutSummary

from aes_lib.bus import kv as kvs
from aes_lib.bus.client import History
from aes_lib.contamination.novelty import Signature, diversity, signature_key
from aes_lib.bus.deadletters import DEAD_LETTERS
from aes_lib.config import Settings
from aes_lib.contamination import KV_BUCKET, registered
from aes_lib.review import ReviewSettings
from aes_services.contamination import NO_HELDOUT_INDEX, NO_INDEX_HELP
from aes_lib.flywheel.config import FlywheelConfig
from aes_proto.records import NOVELTY_BUCKET, PoolEntry
from aes_lib.runners.pool_store import BUCKET, PoolStore
from aes_lib.flywheel.status import Status, summarize
from aes_ops.connect import with_bus

M = TypeVar("M", bound=Message)


@dataclasses.dataclass(frozen=True)
class Snapshot:
    results: list[CalibrationResult]
    events: list[PoolEvent]
    rollouts: list[RolloutSummary]
    pool: list[PoolEntry]
    status: Status

    @property
    def pool_by_category(self) -> dict[str, int]:
        return dict(Counter(e.category for e in self.pool))


def skipped(histories: Iterable[History]) -> dict[str, int]:
    """Subject -> undecodable messages the reads left out, for the subjects that had any."""
    return {h.subject: h.skipped for h in histories if h.skipped}


def unique(messages: Iterable[M]) -> list[M]:
    """One message per idempotency key: a dead letter replayed onto a limits stream
    stores a second copy of a message that stream's other readers already saw."""
    seen: set[str] = set()
    out = []
    for m in messages:
        if m.idempotency_key not in seen:
            seen.add(m.idempotency_key)
            out.append(m)
    return out


@dataclasses.dataclass(frozen=True)
class Gap:
    """An admission check weaker than the paper's, as the deployment is configured."""

    stage: str
    closed: bool
    """True: the stage rejects every candidate until fixed; False: candidates pass it unchecked."""
    text: str


def admission_gaps(settings: Settings, index: BlobRef | None, review: ReviewSettings) -> list[Gap]:
    """What ``aes health``, ``aes status`` and ``aes run`` warn about: the contamination check
    without a held-out index (closed, or off by ``AES_CONTAMINATION_REQUIRED=0``), an advisory
    review, either stage missing from the route."""
    route = settings.route_stages
    out = []
    if "contamination" not in route:
        out.append(Gap("contamination", False, "contamination check OFF: not on AES_ROUTE, candidates are never "
                                               "compared with held-out tasks"))
    elif index is None and settings.contamination_required:
        out.append(Gap("contamination", True, f"the contamination gate rejects every candidate ({NO_HELDOUT_INDEX}): "
                                              f"{NO_INDEX_HELP}"))
    elif index is None:
        out.append(Gap("contamination", False, "contamination check OFF: no held-out index registered and "
                                               "AES_CONTAMINATION_REQUIRED=0, so candidates pass unchecked; register "
                                               "one with `aes contamination index SRC`"))
    if "review" not in route:
        out.append(Gap("review", False, "task review OFF: not on AES_ROUTE"))
    elif not review.enforce:
        out.append(Gap("review", False, "task review advisory: AES_REVIEW_ENFORCE is off, so failed criteria are "
                                        "recorded but reject nothing"))
    return out


async def gaps(bus) -> list[Gap]:
    """``admission_gaps`` of the bus's settings, the registered index and this process's review settings."""
    return admission_gaps(bus.settings, await registered(await bus.kv(KV_BUCKET)), ReviewSettings.from_env())


async def snapshot(bus, config: FlywheelConfig) -> Snapshot:
    read = [
        await bus.history(subjects.RESULT_CALIBRATION, CalibrationResult),
        await bus.history(subjects.POOL_EVENT, PoolEvent),
        await bus.history(subjects.ROLLOUT_SUMMARY, RolloutSummary),
    ]
    letters = await bus.history(DEAD_LETTERS, DeadLetter)
    results, events, rollouts = (unique(h) for h in read)
    solver = [r for r in rollouts if r.role == "solver"]
    pool = await PoolStore(await bus.kv(BUCKET), config.pool_capacity).active_entries()
    status = summarize(results, events, solver, letters, skipped([*read, letters]), [g.text for g in await gaps(bus)])
    status = dataclasses.replace(status, diversity=await pool_diversity(bus, pool))
    return Snapshot(results, events, solver, pool, status)


async def pool_diversity(bus, pool: list[PoolEntry]) -> tuple[float, int] | None:
    """``novelty.diversity`` of the signatures the novelty gate keeps for the active pool, and their number."""
    kv = await bus.kv(NOVELTY_BUCKET)
    signed = [s for e in pool if (s := await kvs.read(kv, signature_key(e.env_id), Signature)) is not None]
    score = diversity(signed)
    return None if score is None else (score, len(signed))


async def read(settings: Settings | None = None) -> Snapshot:
    """The snapshot of the stack ``settings`` (the environment's by default) points at."""
    return await with_bus("aes-status", lambda bus: snapshot(bus, FlywheelConfig.from_env()), settings)
