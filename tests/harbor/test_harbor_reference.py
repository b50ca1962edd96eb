"""Harbor 0.26 itself as the reference: the Harbor-style fixture tasks pass our validator and
Harbor's oracle, and ``aes pool export`` writes a dataset Harbor reads and solves."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

import pytest

from aes_lib.bundle import Task
from aes_lib.runners.pool_store import BUCKET, PoolStore
from aes_lib.sandbox import VERIFIER_TEMPLATE, validate_task
from aes_ops.harbor_ref import harbor_copy, run
from aes_ops.seeding import export, seed_dirs, seed_pool

TASKS = Path(__file__).parent / "tasks"
FIXTURES = sorted(p.name for p in TASKS.iterdir() if (p / "task.toml").is_file())
UNSUPPORTED = {
    "network-allowlist-wildcard": "allowed_hosts *.pythonhosted.org: wildcard names and IPv6 entries are not enforced",
    "windows": 'os = "windows" needs Windows containers',
    "empty-environment": "environment/ has no Dockerfile or docker-compose file",
}
"""Shapes that load and get a clear ``unsupported`` verdict (never a load or field error)."""
NO_REFERENCE = ("no-solution",)
VALID = [n for n in FIXTURES if n not in UNSUPPORTED and n not in NO_REFERENCE]
HARBOR_READS_ONLY_YAML = ("compose-yml",)
"""Harbor 0.26 reads environment/docker-compose.yaml only: it runs this task without its database."""
HARBOR_NEEDS_A_REGISTRY = ("network-allowlist",)
"""Harbor enforces an allow-list with a proxy sidecar whose images it pulls from Docker Hub,
which these machines cannot reach (tests/sandbox/test_hostile_builds.py checks ours)."""
EXPECTED_WARNINGS = {
    "registry-style": ["task.format is not a Harbor 0.26 field", "task.workstream is not a Harbor 0.26 field",
                       "task.language is not a Harbor 0.26 field", "top-level version is Harbor's older name",
                       "mcp_servers (1) are not offered"],
}


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_keeps_the_managed_verifier_verbatim(name) -> None:
    # Each task folder must stand alone for `harbor run`, so each holds a copy; this keeps them in step.
    copies = [*(TASKS / name).glob("tests/test.sh"), *(TASKS / name).glob("steps/*/tests/test.sh")]
    assert copies or name == "windows"
    for copy in copies:
        assert copy.read_bytes() == (VERIFIER_TEMPLATE / "test.sh").read_bytes(), copy


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
async def test_shapes_this_sandbox_does_not_run_load_and_are_unsupported(name, images, test_label) -> None:
    task = Task.load(TASKS / name)  # no load error, no field error
    report = await validate_task(TASKS / name, images, labels=test_label, require_reference=False)
    assert (report.ok, report.reason) == (False, "unsupported"), report.detail
    assert UNSUPPORTED[name] in report.detail and task.unsupported


async def test_a_task_without_a_reference_solution_is_admitted_by_build_and_nop_only_when_imported(
        images, test_label) -> None:
    task = Task.load(TASKS / "no-solution")
    assert not task.has_solution
    imported = await validate_task(TASKS / "no-solution", images, labels=test_label, require_reference=False)
    assert (imported.ok, imported.reason, imported.no_reference) == (True, "ok", True), imported.logs
    assert (imported.oracle_reward, imported.nop_reward) == (None, 0.0)
    assert "oracle not run" in imported.detail
    generated = await validate_task(TASKS / "no-solution", images, labels=test_label)
    assert (generated.ok, generated.reason) == (False, "invalid_bundle")
    assert "missing solution/solve.sh" in generated.detail


def test_compose_shapes_load_as_written() -> None:
    built = Task.load(TASKS / "compose-main-build")
    assert built.compose.main_build == "app" and built.main_context == TASKS / "compose-main-build/environment/app"
    assert built.compose.volumes == ("kvdata",) and built.compose.services[0].volumes == {"kvdata": "/data"}
    yml = Task.load(TASKS / "compose-yml")
    assert [s.name for s in yml.compose.services] == ["db"]
    assert any("Harbor 0.26 reads only docker-compose.yaml" in w for w in yml.warnings)
    assert any("networks (backend) are one internal network" in w for w in yml.warnings)
    steps = Task.load(TASKS / "multi-step")
    assert steps.steps == ("Create /srv/log.txt holding the line `one`.\n", "Append the line `two` to /srv/log.txt.\n")


@pytest.mark.parametrize("name", VALID)
async def test_harbor_style_task_validates_here(name, images, test_label) -> None:
    report = await validate_task(TASKS / name, images, labels=test_label)
    assert (report.ok, report.reason, report.oracle_reward, report.nop_reward) == (True, "ok", 1.0, 0.0), report.logs
    for expected in EXPECTED_WARNINGS.get(name, []):
        assert any(expected in w for w in report.warnings), (expected, report.warnings)


def _dataset(names, dest: Path) -> Path:
    dest.mkdir()
    for name in names:
        harbor_copy(TASKS / name, dest / name)
    return dest


@pytest.mark.slow  # Harbor builds and runs every fixture twice
def test_harbor_agrees_on_the_fixture_tasks(harbor, tmp_path) -> None:
    both = [n for n in VALID if n not in HARBOR_READS_ONLY_YAML + HARBOR_NEEDS_A_REGISTRY]
    dataset = _dataset(both, tmp_path / "dataset")
    oracle = run(harbor, dataset, "oracle", tmp_path)
    assert {t.task: t.reward for t in oracle.trials} == {f"harbor-style/{n}": 1.0 for n in both}, oracle.output
    # Without a reference solution, Harbor and this sandbox agree on the empty solution's score.
    dataset = _dataset([*both, *NO_REFERENCE], tmp_path / "with-unsolved")
    nop = run(harbor, dataset, "nop", tmp_path)
    assert len(nop.trials) == len(both) + 1 and all(t.reward == 0.0 for t in nop.trials), nop.output


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


@pytest.mark.slow  # Harbor builds and runs every seed
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
    assert all(t.reward == 1.0 for t in job.trials), [(t.task, t.reward, t.error) for t in job.trials
                                                      if t.reward != 1.0]
