"""Pool state: pure transitions, and the KV store under concurrent replicas (real nats-server)."""

import asyncio

import nats
import pytest

from aes_proto.messages import BlobRef

from aes_lib.flywheel.pool import PoolCapacityError, admit, out_of_band, retire
from aes_proto.records import PoolEntry, PoolIndex
from aes_lib.runners.pool_store import BUCKET, PoolStore


def _entry(env_id: str) -> PoolEntry:
    return PoolEntry(env_id=env_id, bundle=BlobRef(key=f"b/{env_id}", sha256=env_id, size=1))


def test_admit_adds_once():
    a = admit(PoolIndex(), "e1", capacity=4)
    assert a.kind == "admitted" and a.index.active == ("e1",)
    again = admit(a.index, "e1", capacity=4)
    assert again.kind == "duplicate" and again.index == a.index


def test_full_pool_evicts_the_oldest():
    idx = PoolIndex(active=("e1", "e2"))
    a = admit(idx, "e3", capacity=2)
    assert a.index.active == ("e2", "e3") and a.evicted == ("e1",)


def test_capacity_must_be_positive():
    with pytest.raises(PoolCapacityError):
        admit(PoolIndex(), "e1", capacity=0)


def test_retire_reports_only_active_ids():
    idx, removed = retire(PoolIndex(active=("e1", "e2", "e3")), ["e2", "zz"])
    assert idx.active == ("e1", "e3") and removed == ("e2",)


def test_out_of_band():
    assert out_of_band({"a": 0.1, "b": 0.5, "c": 0.9, "d": 0.25}, 0.25, 0.75) == ["a", "c"]


async def _kv(settings):
    nc = await nats.connect(settings.nats_url, user=settings.nats_user or None, password=settings.nats_password or None)
    js = nc.jetstream()
    try:
        kv = await js.key_value(BUCKET)
    except Exception:
        kv = await js.create_key_value(bucket=BUCKET, history=1)
    return nc, kv


async def test_concurrent_replicas_never_admit_twice(fresh_nats):
    """Eight replicas, each with its own connection, race to admit the same 20 environments."""
    conns = [await _kv(fresh_nats) for _ in range(8)]
    stores = [PoolStore(kv, capacity=256) for _, kv in conns]
    ids = [f"{i:064x}" for i in range(20)]

    async def replica(store):
        return [await store.admit(_entry(e)) for e in ids]

    results = await asyncio.gather(*(replica(s) for s in stores))
    kinds = [c.admission.kind for r in results for c in r]
    assert kinds.count("admitted") == len(ids)
    assert kinds.count("duplicate") == len(ids) * 7
    idx = await stores[0].index()
    assert sorted(idx.active) == ids
    for nc, _ in conns:
        await nc.close()


async def test_concurrent_distinct_admissions_all_land(fresh_nats):
    """CAS retries: 4 replicas admit 10 different environments each; none is lost."""
    conns = [await _kv(fresh_nats) for _ in range(4)]
    stores = [PoolStore(kv, capacity=256) for _, kv in conns]

    async def replica(i, store):
        for j in range(10):
            await store.admit(_entry(f"{i:02d}{j:062x}"))

    await asyncio.gather(*(replica(i, s) for i, s in enumerate(stores)))
    idx = await stores[0].index()
    assert len(idx.active) == 40 and len(set(idx.active)) == 40
    for nc, _ in conns:
        await nc.close()


async def test_retired_environment_is_never_readmitted(fresh_nats):
    nc, kv = await _kv(fresh_nats)
    store = PoolStore(kv, capacity=2)
    for e in ("e1", "e2", "e3"):  # e1 is evicted by e3
        await store.admit(_entry(e))
    await store.retire(["e2"])
    assert (await store.index()).active == ("e3",)
    for e in ("e1", "e2"):
        c = await store.admit(_entry(e))
        assert c.admission.kind == "duplicate"
        assert (await store.entry(e)).retired
    assert [x.env_id for x in await store.active_entries()] == ["e3"]
    await nc.close()


async def test_set_mean_updates_the_entry(fresh_nats):
    nc, kv = await _kv(fresh_nats)
    store = PoolStore(kv)
    await store.admit(_entry("e1"))
    await store.set_mean("e1", 0.4)
    assert (await store.entry("e1")).mean_reward == 0.4
    await nc.close()
