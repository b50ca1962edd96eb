"""Reading the flywheel's state off the bus: result history and the pool."""

from __future__ import annotations

import dataclasses
from collections import Counter

from aes_proto import subjects
from aes_proto.messages import CalibrationResult, PoolEvent, RolloutSummary

from aes_lib.flywheel.config import FlywheelConfig
from aes_lib.flywheel.pool import PoolEntry
from aes_lib.flywheel.pool_store import BUCKET, PoolStore
from aes_lib.flywheel.status import Status, summarize


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


async def snapshot(bus, config: FlywheelConfig) -> Snapshot:
    results = await bus.history(subjects.RESULT_CALIBRATION, CalibrationResult)
    events = await bus.history(subjects.POOL_EVENT, PoolEvent)
    rollouts = [r for r in await bus.history(subjects.ROLLOUT_SUMMARY, RolloutSummary) if r.role == "solver"]
    pool = await PoolStore(await bus.kv(BUCKET), config.pool_capacity).active_entries()
    return Snapshot(results, events, rollouts, pool, summarize(results, events, rollouts))
