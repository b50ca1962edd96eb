"""Reading the flywheel's state off the bus: result history and the pool."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable
from typing import TypeVar

from aes_proto import subjects
from aes_proto.messages import CalibrationResult, DeadLetter, Message, PoolEvent, RolloutSummary

from aes_lib.bus.client import History
from aes_lib.bus.deadletters import DEAD_LETTERS
from aes_lib.flywheel.config import FlywheelConfig
from aes_proto.records import PoolEntry
from aes_lib.flywheel.runners.pool_store import BUCKET, PoolStore
from aes_lib.flywheel.status import Status, summarize

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
    status = summarize(results, events, solver, letters, skipped([*read, letters]))
    return Snapshot(results, events, solver, pool, status)
