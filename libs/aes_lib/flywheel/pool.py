"""Pool transitions as pure functions on the records (``aes_proto.records.PoolEntry``, ``PoolIndex``).

The index is one small record (the ordered ids of active environments) so that a
single compare-and-set on it decides admission: two replicas that race to admit
the same environment, or to fill the last slot, cannot both win.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Literal

from aes_proto.records import PoolIndex


@dataclasses.dataclass(frozen=True)
class Admission:
    """Result of admitting one environment into an index."""

    kind: Literal["admitted", "duplicate"]
    index: PoolIndex
    evicted: tuple[str, ...] = ()
    """Oldest entries pushed out because the pool was at capacity."""


class PoolCapacityError(ValueError):
    """A pool capacity below one."""


def admit(index: PoolIndex, env_id: str, capacity: int) -> Admission:
    """Add ``env_id``; a full pool evicts its oldest entries to keep ``capacity``.

    Eviction rather than refusal because an admitted environment was just shown
    to be in the current solver's band, while the oldest one was calibrated
    against an older solver.
    """
    if capacity < 1:
        raise PoolCapacityError(f"pool capacity must be >= 1, got {capacity}")
    if env_id in index.active:
        return Admission("duplicate", index)
    active = index.active + (env_id,)
    overflow = max(0, len(active) - capacity)
    return Admission("admitted", PoolIndex(active=active[overflow:]), evicted=active[:overflow])


def retire(index: PoolIndex, env_ids: Iterable[str]) -> tuple[PoolIndex, tuple[str, ...]]:
    """Remove ``env_ids``; returns the new index and the ids that were actually active."""
    gone = set(env_ids)
    removed = tuple(e for e in index.active if e in gone)
    return PoolIndex(active=tuple(e for e in index.active if e not in gone)), removed


def out_of_band(means: dict[str, float], low: float, high: float) -> list[str]:
    """Environments whose rerun mean left the band ``[low, high]``, in input order."""
    return [env for env, m in means.items() if not (low <= m <= high)]
