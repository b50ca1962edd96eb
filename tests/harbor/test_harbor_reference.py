"""Harbor 0.26 itself as the reference: the Harbor-style fixture tasks pass our validator and
Harbor's oracle, and ``aes pool export`` writes a dataset Harbor reads and solves."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

import pytest

from aes_lib.flywheel.runners.pool_store import BUCKET, PoolStore
from aes_lib.sandbox import VERIFIER_TEMPLATE, validate_task
from aes_ops.harbor_ref import harbor_copy, run
from aes_ops.seeding import export, seed_dirs, seed_pool

TASKS = Path(__file__).parent / "tasks"
FIXTURES = sorted(p.name for p in TASKS.iterdir() if (p / "task.toml").is_file())
EXPECTED_WARNINGS = {
    "registry-style": ["task.format is not a Harbor 0.26 field", "task.workstream is not a Harbor 0.26 field",
                       "task.language is not a Harbor 0.26 field", "top-level version is Harbor's older name",
                       "mcp_servers (1) are not offered"],
}


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_keeps_the_managed_verifier_verbatim(name) -> None:
    # Each task folder must stand alone for `harbor run`, so each holds a copy; this keeps them in step.
    assert (TASKS / name / "tests" / "test.sh").read_bytes() == (VERIFIER_TEMPLATE / "test.sh").read_bytes()


@pytest.mark.parametrize("name", FIXTURES)
async def test_harbor_style_task_validates_here(name, images, test_label) -> None:
    report = await validate_task(TASKS / name, images, labels=test_label)
    assert (report.ok, report.reason, report.oracle_reward, report.nop_reward) == (True, "ok", 1.0, 0.0), report.logs
    for expected in EXPECTED_WARNINGS.get(name, []):
        assert any(expected in w for w in report.warnings), (expected, report.warnings)


def test_harbor_agrees_on_the_fixture_tasks(harbor, tmp_path) -> None:
    dataset = harbor_copy(TASKS, tmp_path / "dataset")
    oracle = run(harbor, dataset, "oracle", tmp_path)
    assert {t.task: t.reward for t in oracle.trials} == {f"harbor-style/{n}": 1.0 for n in FIXTURES}, oracle.output
    nop = run(harbor, dataset, "nop", tmp_path)
    assert len(nop.trials) == len(FIXTURES) and all(t.reward == 0.0 for t in nop.trials), nop.output


# Harbor's own models read our dataset.toml, and its packager computes the digests we wrote.
_HARBOR_CHECK = """
import sys, tomllib
from pathlib import Path
from harbor.models.dataset.manifest import DatasetManifest
from harbor.publisher.packager import Packager
path = Path(sys.argv[1])
manifest = DatasetManifest.from_toml_file(path)
folders = {r["name"]: r["folder"] for r in tomllib.loads(path.read_text())["metadata"]["aes"]}
for ref in manifest.tasks:
    digest, _ = Packager.compute_content_hash(path.parent / folders[ref.name])
    print(ref.name, "ok" if ref.digest == "sha256:" + digest else "MISMATCH " + digest)
"""


async def test_pool_export_is_a_harbor_dataset_its_oracle_solves(harbor, bus, tmp_path) -> None:
    store = PoolStore(await bus.kv(BUCKET))
    await seed_pool(bus, store, seed_dirs())
    manifest = export(await store.active_entries(), bus.blobs, tmp_path / "export", name="aes-test/pool")
    names = [t["name"] for t in tomllib.loads(manifest.read_text())["tasks"]]
    assert len(names) == len(seed_dirs())

    python = harbor.parent / "python"
    check = subprocess.run([str(python), "-c", _HARBOR_CHECK, str(manifest)], capture_output=True, text=True,
                           timeout=300)
    assert check.returncode == 0, check.stderr
    assert sorted(check.stdout.split()) == sorted([*names, *["ok"] * len(names)]), check.stdout

    job = run(harbor, harbor_copy(manifest.parent, tmp_path / "for-harbor"), "oracle", tmp_path)
    assert sorted(t.task for t in job.trials) == sorted(names), job.output
    assert all(t.reward == 1.0 for t in job.trials), [(t.task, t.reward, t.error) for t in job.trials]
