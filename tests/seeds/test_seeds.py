"""The bundled seed tasks: each is a well-formed offline Harbor task, and each passes the real validator."""

from __future__ import annotations

import re
import subprocess
import tomllib
import uuid
from pathlib import Path

import pytest

from aes_lib.bundle import Task
from aes_lib.sandbox import VERIFIER_TEMPLATE, ImageCache, validate_task

ROOT = Path(__file__).resolve().parents[2]
SEEDS_DIR = ROOT / "seeds"
SEEDS = sorted(p.name for p in SEEDS_DIR.iterdir() if (p / "task.toml").is_file())
# Build steps must not reach a registry or a package index: the sandbox builds with no network.
NETWORK_COMMANDS = re.compile(r"\b(apt-get|apt|pip3?|curl|wget|git\s+clone|npm|uv)\b")


def config(seed: str) -> dict:
    return tomllib.loads((SEEDS_DIR / seed / "task.toml").read_text())


def test_enough_varied_seeds():
    assert len(SEEDS) >= 12
    difficulties = {config(s)["metadata"]["difficulty"] for s in SEEDS}
    assert difficulties == {"easy", "medium", "hard"}
    assert len({config(s)["metadata"]["category"] for s in SEEDS}) >= 8


@pytest.mark.parametrize("seed", SEEDS)
def test_bundle_checks_out(seed):
    task = Task.load(SEEDS_DIR / seed)
    assert task.name == f"aes-seeds/{seed}"
    assert task.instruction.strip()


@pytest.mark.parametrize("seed", SEEDS)
def test_config_is_offline_and_complete(seed):
    cfg = config(seed)
    assert cfg["schema_version"] == "1.4"
    assert cfg["task"]["description"] and cfg["task"]["keywords"]
    assert cfg["metadata"]["difficulty"] in {"easy", "medium", "hard"}
    assert cfg["metadata"]["category"] and cfg["metadata"]["tags"]
    assert cfg["environment"]["allow_internet"] is False
    assert cfg["agent"]["timeout_sec"] > 0 and cfg["verifier"]["timeout_sec"] > 0
    assert all(cfg["environment"][k] > 0 for k in ("cpus", "memory_mb", "storage_mb", "build_timeout_sec"))


@pytest.mark.parametrize("seed", SEEDS)
def test_uses_the_managed_verifier(seed):
    tests = SEEDS_DIR / seed / "tests"
    assert (tests / "test.sh").read_bytes() == (VERIFIER_TEMPLATE / "test.sh").read_bytes()
    # Several test cases per task (functions or parametrized cases), so the reward is fractional.
    source = "".join(p.read_text() for p in tests.glob("test_*.py"))
    assert len(re.findall(r"^def test_", source, re.M)) >= 5 or "@pytest.mark.parametrize" in source


@pytest.mark.parametrize("seed", SEEDS)
def test_image_is_local_and_offline(seed):
    lines = [ln.strip() for ln in (SEEDS_DIR / seed / "environment/Dockerfile").read_text().splitlines()]
    instructions = [ln for ln in lines if ln and not ln.startswith("#")]
    assert instructions[0] == "FROM aes-base:latest"
    assert any(ln.startswith("WORKDIR /") for ln in instructions)
    run_steps = " ".join(ln for ln in instructions if ln.startswith("RUN"))
    assert not NETWORK_COMMANDS.search(run_steps), run_steps


@pytest.mark.parametrize("seed", SEEDS)
def test_solution_does_not_peek_at_tests(seed):
    for path in (SEEDS_DIR / seed / "solution").rglob("*"):
        if path.is_file():
            assert "/tests" not in path.read_text(), path


def test_harbor_reads_every_task_toml(harbor):
    # Harbor's own TaskConfig must accept each file unchanged (field names, schema_version).
    script = (
        "import sys, pathlib; from harbor.models.task.config import TaskConfig\n"
        "for d in sys.argv[1:]:\n"
        "    c = TaskConfig.model_validate_toml((pathlib.Path(d) / 'task.toml').read_text())\n"
        "    print(d, c.task.name, c.environment.network_mode.value)\n"
    )
    result = subprocess.run([str(harbor.parent / "python"), "-c", script, *(str(SEEDS_DIR / s) for s in SEEDS)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    parsed = [line.split() for line in result.stdout.splitlines()]
    assert [(name, mode) for _, name, mode in parsed] == [(f"aes-seeds/{s}", "no-network") for s in SEEDS]


def test_readme_lists_every_seed():
    readme = (SEEDS_DIR / "README.md").read_text()
    listed = set(re.findall(r"^\| `([a-z0-9-]+)` \|", readme, re.M))
    assert listed == set(SEEDS)


@pytest.mark.docker
@pytest.mark.parametrize("seed", SEEDS)
async def test_seed_validates(seed, images):
    label = {"aes.managed": "1", "aes.test": f"seeds-{uuid.uuid4().hex[:8]}"}
    report = await validate_task(SEEDS_DIR / seed, images, labels=label)
    assert report.ok, f"{report.reason}: {report.detail}\n{report.logs[-4000:]}"
    assert report.oracle_reward == 1.0 and report.nop_reward < 0.5
    left = images.client.containers.list(all=True, filters={"label": f"aes.test={label['aes.test']}"})
    assert not left, f"containers left behind: {[c.name for c in left]}"
