"""The swe domain: its declaration, its gate's static rules, and, with Docker, its seeds
through the real validator and gate, and the gate's verdicts on broken repositories."""

from __future__ import annotations

import re
import shutil
import uuid
from pathlib import Path

import pytest

from aes_lib.bundle import Task
from aes_lib.domains import get
from aes_lib.sandbox import VERIFIER_TEMPLATE

from aes_domains.swe import DOMAIN
from aes_domains.swe.gate import SweGate

SEEDS = {p.name: p for p in DOMAIN.seeds}


def variant(tmp_path: Path, seed: str, toml: dict[str, str] | None = None, dockerfile_tail: str = "",
            files: dict[str, str] | None = None) -> Task:
    """A copy of ``seed`` with task.toml lines replaced (regex -> line), lines added to its
    Dockerfile and files (under the task folder) written."""
    root = tmp_path / f"{seed}-{uuid.uuid4().hex[:6]}"
    shutil.copytree(SEEDS[seed], root)
    text = (root / "task.toml").read_text()
    for pattern, line in (toml or {}).items():
        text, n = re.subn(pattern, line, text, flags=re.M)
        assert n == 1, pattern
    (root / "task.toml").write_text(text)
    if dockerfile_tail:
        with (root / "environment/Dockerfile").open("a") as f:
            f.write(dockerfile_tail)
    for rel, content in (files or {}).items():
        (root / rel).write_text(content)
    return Task.load(root)


def test_declared_and_registered():
    assert get("swe") is DOMAIN and DOMAIN.title == "Software engineering"
    assert DOMAIN.image is None, "aes-base has git, python3 and pytest: no image of its own"
    assert DOMAIN.route(("validator",)) == ("swe", "validator")
    assert "git" in DOMAIN.solver_prompt and "tests" in DOMAIN.solver_prompt
    assert "public_tests" in DOMAIN.proposer_guide and "dirty_repo" in DOMAIN.proposer_guide
    assert sorted(SEEDS) == ["fix-negative-time-buckets", "fix-prerelease-ordering"]


@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_seed_is_a_complete_offline_task(seed):
    task = Task.load(SEEDS[seed])
    meta = task.config.metadata
    assert task.name == f"aes-seeds/{seed}"
    assert meta["domain"] == "swe" and meta["repo"] == "/app/repo" and meta["public_tests"]
    assert meta["difficulty"] in {"easy", "medium", "hard"} and meta["category"]
    assert task.config.environment.allow_internet is False
    assert (task.tests_dir / "test.sh").read_bytes() == (VERIFIER_TEMPLATE / "test.sh").read_bytes()
    assert meta["repo"] in task.instruction
    assert SweGate().check(task) is None


@pytest.mark.parametrize("toml, reason", [
    ({r"^repo = .*$": ""}, "no_repo_path"),
    ({r"^repo = .*$": 'repo = "app/repo"'}, "repo_not_absolute"),
    ({r"^public_tests = .*$": 'public_tests = " "'}, "no_public_tests"),
])
def test_check_refuses_incomplete_metadata(tmp_path, toml, reason):
    verdict = SweGate().check(variant(tmp_path, "fix-negative-time-buckets", toml))
    assert verdict is not None and (verdict.stage, verdict.ok, verdict.reason) == ("swe", False, reason)


@pytest.mark.docker
async def test_public_tests_failing_at_start_are_refused(tmp_path, images):
    # A public test the shipped code fails, committed so the tree stays clean.
    task = variant(tmp_path, "fix-negative-time-buckets", files={
        "environment/repo/tests/test_windows.py":
            (SEEDS["fix-negative-time-buckets"] / "environment/repo/tests/test_windows.py").read_text()
            + "\n\ndef test_negative():\n    assert bucket_start(-1, 60) == -60\n"})
    report = await SweGate(images).check_task(task)
    v = report.verdict
    assert (v.ok, v.reason) == (False, "public_tests_fail"), v
    assert "test_negative" in v.detail


@pytest.mark.docker
@pytest.mark.parametrize("change, reason", [
    ({"dockerfile_tail": "RUN echo draft > /app/repo/NOTES.txt\n"}, "dirty_repo"),
    ({"dockerfile_tail": "RUN echo '# wip' >> /app/repo/tsbucket/windows.py\n"}, "dirty_repo"),
    ({"toml": {r"^repo = .*$": 'repo = "/srv"'}}, "no_repo"),
    ({"dockerfile_tail": "RUN rm -rf /app/repo/.git && git init -q /app/repo\n"}, "no_commits"),
])
async def test_repository_rules(tmp_path, images, change, reason):
    report = await SweGate(images).check_task(variant(tmp_path, "fix-negative-time-buckets", **change))
    assert (report.verdict.ok, report.verdict.reason) == (False, reason), report.verdict
