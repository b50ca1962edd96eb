"""Pool state as values: entries and the active index, and the pure transitions on them.

The index is one small record (the ordered ids of active environments) so that a
single compare-and-set on it decides admission: two replicas that race to admit
the same environment, or to fill the last slot, cannot both win.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Literal

import msgspec

from aes_proto.messages import BlobRef


class PoolEntry(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """One environment the pool has seen (active or retired)."""

    env_id: str
    """Content hash of the bundle."""
    bundle: BlobRef
    category: str = ""
    mean_reward: float | None = None
    """Latest mean solver reward (calibration, then each pool review)."""
    source: Literal["seed", "calibration"] = "calibration"
    assignment_id: str = ""
    episode_id: str = ""
    round: int = 0
    """Flywheel round in which the environment was admitted."""
    name: str = ""
    """Harbor task name, used as the directory name on export."""
    retired: bool = False
    """Set once the environment leaves the pool; a retired environment never comes back."""


class PoolIndex(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """The active pool: ids in admission order (oldest first)."""

    active: tuple[str, ...] = ()


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
