"""Novelty: MinHash similarity of tasks, and the gate on a real bus and store against a real pool."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from aes_proto import subjects
from aes_proto.messages import Assignment, CalibrationResult, CandidateEnv, GateResult, Lineage
from aes_proto.records import NOVELTY_BUCKET, PoolEntry

from aes_lib.bundle import pack
from aes_lib.contamination.novelty import NoveltySettings, NoveltySettingsError, diversity, signature, similarity, task_parts
from aes_lib.flywheel.status import render
from aes_lib.runners.pool_store import BUCKET, PoolStore
from aes_ops.readout import snapshot
from aes_lib.flywheel.config import FlywheelConfig
from aes_services.novelty import NoveltyGateService

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "flywheel"))
from flywheel_helpers import drain_workqueue, running, wait_for  # noqa: E402
from test_gates_services import NextStage  # noqa: E402

SEEDS = Path(__file__).resolve().parents[2] / "seeds"
SEED = SEEDS / "csv-sales-rollup"
OTHER = SEEDS / "reconcile-bank-ledger"


def near_copy(tmp_path: Path, name: str = "variant") -> Path:
    """The seed with one line added to its instruction: what a proposer that copies its parent writes."""
    task = tmp_path / name
    shutil.copytree(SEED, task)
    (task / "instruction.md").write_text("Variant of the roll-up task.\n\n" + (SEED / "instruction.md").read_text())
    return task


def test_a_near_copy_is_near_and_different_tasks_are_far(tmp_path):
    seed, copy, other = signature(SEED), signature(near_copy(tmp_path)), signature(OTHER)
    near = similarity(copy, seed)
    assert near["tests"] == 1.0 and near["files"] == 1.0 and 0.9 < near["instruction"] < 1.0
    assert near["overall"] >= NoveltySettings().threshold
    assert similarity(seed, other)["overall"] < 0.1
    assert similarity(seed, seed)["overall"] == 1.0
    assert diversity([seed, copy]) < 0.05 < 0.9 < diversity([seed, other])
    assert diversity([seed]) is None


def test_what_every_task_shares_is_not_counted(tmp_path):
    parts = task_parts(SEED)
    assert "AES managed verifier" not in parts["tests"]  # the managed template, the same in every task
    assert "def test_header" in parts["tests"] and "parse_amount" in parts["files"]
    task = near_copy(tmp_path)
    (task / "environment" / "blob.bin").write_bytes(b"\x00" * 64 + b"binary")
    assert "binary" not in task_parts(task)["files"]


def test_settings_refuse_an_impossible_threshold():
    with pytest.raises(NoveltySettingsError):
        NoveltySettings(threshold=0.0)


def _candidate(bus, task: Path, key: str, parent: str | None = None) -> CandidateEnv:
    packed = pack(task)
    ref = bus.blobs.put_content("bundles", packed.data, suffix=".tar.gz")
    return CandidateEnv(idempotency_key=key, episode_id=f"ep-{key}", env_id=packed.sha256, bundle=ref,
                        lineage=Lineage(assignment_id=f"as-{key}", parent_env_id=parent), route=("novelty", "calibrate"))


async def _pool_of(bus, *tasks: Path) -> list[PoolEntry]:
    store = PoolStore(await bus.kv(BUCKET))
    entries = []
    for task in tasks:
        packed = pack(task)
        ref = bus.blobs.put_content("bundles", packed.data, suffix=".tar.gz")
        entries.append(entry := PoolEntry(env_id=packed.sha256, bundle=ref, name=task.name, source="seed"))
        await store.admit(entry)
    return entries


async def test_the_gate_names_the_near_copy_records_it_by_default_and_rejects_it_when_enforced(
        fresh_nats, bus, tmp_path, monkeypatch):
    seed, other = await _pool_of(bus, SEED, OTHER)
    copy = _candidate(bus, near_copy(tmp_path), "copy", parent=seed.env_id)
    fresh = _candidate(bus, SEEDS / "fix-interval-merge", "fresh", parent=seed.env_id)
    async with running(fresh_nats, NoveltyGateService()), NextStage(bus, "calibrate") as calibrate:
        for c in (copy, fresh):
            await bus.publish(subjects.stage("novelty"), c)
        went_on = {(await calibrate.take()).env_id for _ in range(2)}
    assert went_on == {copy.env_id, fresh.env_id}  # advisory: both go on
    gates = {g.idempotency_key: g for g in await bus.history(subjects.RESULT_GATE, GateResult)}
    recorded = gates["copy:novelty"]
    assert (recorded.ok, recorded.reason) == (True, "near_copy")
    assert recorded.detail.startswith("recorded only, AES_NOVELTY_ENFORCE is off: nearest of 2: its parent csv-sales-rollup")
    assert "tests 1.00, files 1.00" in recorded.detail
    assert (gates["fresh:novelty"].ok, gates["fresh:novelty"].reason) == (True, "ok")
    # The pool tasks' signatures are kept, and the candidates' own, for later candidates.
    kv = await bus.kv(NOVELTY_BUCKET)
    assert set(await kv.keys()) >= {f"env.{e}" for e in (seed.env_id, other.env_id, copy.env_id, fresh.env_id)}

    monkeypatch.setenv("AES_NOVELTY_ENFORCE", "1")
    again = _candidate(bus, near_copy(tmp_path, "variant-2"), "again", parent=seed.env_id)
    async with running(fresh_nats, NoveltyGateService()):
        await bus.publish(subjects.stage("novelty"), again)
        [rejected] = await wait_for(bus, subjects.RESULT_CALIBRATION, CalibrationResult, lambda m: m)
        [revision] = await drain_workqueue(bus, subjects.ASSIGNMENT, Assignment, 1)
    assert (rejected.decision, rejected.verdicts[-1].reason) == ("rejected", "near_copy")
    assert "near-copy of one the pool has" in revision.feedback and "csv-sales-rollup" in revision.feedback

    # The pool's diversity in the status, from the signatures the gate kept.
    snap = await snapshot(bus, FlywheelConfig())
    assert snap.status.diversity is not None and snap.status.diversity[1] == 2
    assert snap.status.diversity[0] > 0.9  # two different seeds
    assert "pool diversity: " in render(snap.status, len(snap.pool), snap.pool_by_category)


async def test_a_candidate_without_a_pool_passes_with_nothing_to_compare(fresh_nats, bus, tmp_path):
    c = _candidate(bus, SEED, "alone")
    async with running(fresh_nats, NoveltyGateService()), NextStage(bus, "calibrate") as calibrate:
        await bus.publish(subjects.stage("novelty"), c)
        assert (await calibrate.take()).env_id == c.env_id
    [g] = await bus.history(subjects.RESULT_GATE, GateResult)
    assert (g.ok, g.reason, g.detail) == (True, "ok", "nothing to compare with (0 pool tasks)")
