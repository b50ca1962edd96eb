"""``aes pool seed|list|export``, ``aes status`` and ``aes report`` as subprocesses against a real bus;
``aes train``'s work (``aes_ops.runs``) on an empty pool."""

import tomllib

import pytest

from aes_proto import subjects
from aes_proto.messages import CalibrationResult, Lineage, PoolEvent, Verdict

from aes_lib.bundle import Task
from aes_lib.bundle.harbor_dataset import content_digest
from aes_lib.runners.pool_store import BUCKET, PoolStore
from aes_ops.runs import EmptyPoolError, training_only
from aes_ops.seeding import seed_dirs

from flywheel_helpers import aes


async def test_seed_is_idempotent_and_export_writes_a_harbor_dataset(fresh_nats, bus, tmp_path):
    n = len(seed_dirs())
    assert f"seeded {n} tasks" in await aes(fresh_nats, "pool", "seed")
    assert f"pool has {n}" in await aes(fresh_nats, "pool", "seed")  # again: nothing added
    idx = await PoolStore(await bus.kv(BUCKET)).index()
    assert len(idx.active) == n
    admitted = [e for e in await bus.history(subjects.POOL_EVENT, PoolEvent) if e.kind == "admitted"]
    assert len(admitted) == n  # the second seeding republished the same keys: dropped
    listing = await aes(fresh_nats, "pool", "list")
    assert "csv-sales-rollup" in listing and len(listing.splitlines()) == 1 + n  # header, tasks

    out = tmp_path / "dataset"
    await aes(fresh_nats, "pool", "export", str(out))
    manifest = tomllib.loads((out / "dataset.toml").read_text())
    assert manifest["dataset"]["name"] == "aes/pool" and len(manifest["tasks"]) == n
    records = manifest["metadata"]["aes"]
    assert {r["env_id"] for r in records} == set(idx.active)
    for ref, r in zip(manifest["tasks"], records):
        task = Task.load(out / r["folder"])  # a complete, checked Harbor task directory
        assert task.name == ref["name"] == r["name"] and (task.solution_dir / "solve.sh").is_file()
        assert ref["digest"] == content_digest(out / r["folder"])


async def test_status_and_report_read_the_result_streams(fresh_nats, bus, tmp_path):
    ok = Verdict(stage="validate", ok=True, reason="ok")
    for aid, decision, verdicts in [("r1-000", "admitted", (ok,)), ("r1-001", "too_hard", (ok,)),
                                    ("r1-002", "rejected", (Verdict(stage="validate", ok=False, reason="nop_passed"),))]:
        await bus.publish(subjects.RESULT_CALIBRATION, CalibrationResult(
            idempotency_key=aid, episode_id=aid, env_id=aid, lineage=Lineage(assignment_id=aid, round=1, cost_usd=0.5),
            decision=decision, verdicts=verdicts, mean=0.5))
    status = await aes(fresh_nats, "status")
    assert "valid-environment rate: 2/3" in status
    assert "cost per valid environment: $0.7500" in status
    assert "validate:nop_passed" in status and "calibrate:too_hard" in status
    await aes(fresh_nats, "report", str(tmp_path / "r.html"))
    page = (tmp_path / "r.html").read_text()
    assert page.count("data:image/png;base64,") == 3 and "validate:nop_passed" in page


async def test_training_on_an_empty_pool_is_refused_after_recording_the_run(fresh_nats):
    said = []
    with pytest.raises(EmptyPoolError, match="the pool is empty: seed it first"):
        await training_only(fresh_nats, None, said.append)
    assert said[0].startswith("run ") and str(fresh_nats.home) in said[0] and len(said) == 1
