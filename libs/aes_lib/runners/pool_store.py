"""The pool in JetStream KV, updated with compare-and-set.

Keys: ``env.<env_id>`` holds a ``PoolEntry`` (written before the index, and
idempotent because its content is a function of the environment); ``index``
holds the ``PoolIndex``. Every change to the index is a compare-and-set
(``aes_lib.bus.kv.update``), so concurrent replicas serialize on it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

import msgspec

from aes_proto.records import POOL_BUCKET as BUCKET  # noqa: F401 (the store's bucket, for its callers)
from aes_proto.records import PoolEntry, PoolIndex

from aes_lib.bus import kv as kvs
from aes_lib.flywheel.pool import Admission, admit, retire

INDEX_KEY = "index"


@dataclasses.dataclass(frozen=True)
class Change:
    """An index update: what the transition returned and the size afterwards."""

    size: int
    admission: Admission | None = None
    retired: tuple[str, ...] = ()


class PoolStore:
    """Pool state shared by every replica of the pool services."""

    def __init__(self, kv, capacity: int = 256) -> None:
        self._kv = kv
        self.capacity = capacity

    async def index(self) -> PoolIndex:
        """The active index (empty when the pool was never written)."""
        return await kvs.read(self._kv, INDEX_KEY, PoolIndex) or PoolIndex()

    async def _cas(self, transition: Callable[[PoolIndex], tuple[PoolIndex, Change]]) -> Change:
        changes: list[Change] = []

        def step(current: PoolIndex | None) -> PoolIndex:
            new, change = transition(current or PoolIndex())
            changes.append(change)  # the last call's is the one that was written
            return new

        await kvs.update(self._kv, INDEX_KEY, PoolIndex, step)
        return changes[-1]

    async def put_entry(self, entry: PoolEntry) -> None:
        await self._kv.put(f"env.{entry.env_id}", msgspec.msgpack.encode(entry))

    async def entry(self, env_id: str) -> PoolEntry | None:
        return await kvs.read(self._kv, f"env.{env_id}", PoolEntry)

    async def admit(self, entry: PoolEntry) -> Change:
        """Record ``entry`` and add it to the active index exactly once.

        A retired environment is a duplicate: it was calibrated out of the band
        once already, and re-admitting an identical bundle would undo that.
        """
        known = await self.entry(entry.env_id)
        if known is None:
            await self.put_entry(entry)
        elif known.retired:
            idx = await self.index()
            return Change(size=len(idx.active), admission=Admission("duplicate", idx))

        def step(idx: PoolIndex) -> tuple[PoolIndex, Change]:
            a = admit(idx, entry.env_id, self.capacity)
            return a.index, Change(size=len(a.index.active), admission=a)

        change = await self._cas(step)
        for env_id in change.admission.evicted if change.admission else ():
            evicted = await self.entry(env_id)
            if evicted is not None:
                await self.put_entry(msgspec.structs.replace(evicted, retired=True))
        return change

    async def retire(self, env_ids: Iterable[str]) -> Change:
        """Remove ``env_ids`` from the active index; flags the entries first so a
        crash between the two steps cannot let a redelivered admission revive them."""
        ids = tuple(env_ids)
        for env_id in ids:
            entry = await self.entry(env_id)
            if entry is not None and not entry.retired:
                await self.put_entry(msgspec.structs.replace(entry, retired=True))

        def step(idx: PoolIndex) -> tuple[PoolIndex, Change]:
            new, removed = retire(idx, ids)
            return new, Change(size=len(new.active), retired=removed)

        return await self._cas(step)

    async def set_mean(self, env_id: str, mean: float) -> None:
        entry = await self.entry(env_id)
        if entry is not None:
            await self.put_entry(msgspec.structs.replace(entry, mean_reward=mean))

    async def active_entries(self) -> list[PoolEntry]:
        idx = await self.index()
        entries = [await self.entry(e) for e in idx.active]
        return [e for e in entries if e is not None]
