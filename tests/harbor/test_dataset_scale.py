"""Thousands at a time: every task is loaded and pre-checked before anything is built, and an
import killed midway resumes from its journal without redoing a finished task."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aes_lib.bundle.precheck import precheck

TASKS = Path(__file__).parent / "tasks"
ROOT = Path(__file__).resolve().parents[2]
EXPECTED = {
    "compose-app-db": "build", "compose-main-build": "build", "compose-yml": "build", "prebuilt-image": "build",
    "registry-style": "build", "separate-verifier": "build", "verifier-collect": "build",
    "no-solution": "no_reference", "multi-step": "build", "network-allowlist": "build",
    "network-allowlist-wildcard": "unsupported",
    "windows": "unsupported", "empty-environment": "unsupported",
}


def test_precheck_gives_every_fixture_its_verdict_without_building(tmp_path, capsys) -> None:
    from aes_cli.main import main

    broken = tmp_path / "broken"
    shutil.copytree(TASKS / "prebuilt-image", broken)
    (broken / "instruction.md").unlink()
    assert main(["validate", "--precheck", "--json", str(TASKS), str(broken)]) == 1  # some would not build
    checks = json.loads(capsys.readouterr().out)
    assert {Path(c["path"]).name: c["verdict"] for c in checks} == {**EXPECTED, "broken": "load_error"}
    assert [c["detail"] for c in checks if c["verdict"] == "load_error"] == ["MissingFileError: missing instruction.md"]
    assert main(["validate", "--precheck", str(TASKS / "prebuilt-image")]) == 0
    assert "1 tasks: 1 build" in capsys.readouterr().out


def test_identical_tasks_share_a_digest(tmp_path) -> None:
    shutil.copytree(TASKS / "no-solution", tmp_path / "copy")
    assert precheck(tmp_path / "copy").digest == precheck(TASKS / "no-solution").digest != ""


_RUN = """
import asyncio, sys
from pathlib import Path
import docker
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import ImageCache
from aes_ops.seeding import validate_dataset
root, journal, log = map(Path, sys.argv[1:4])
def progress(src, line):
    with log.open("a") as f:
        f.write(f"{src.name} {line}\\n")
tasks, _ = asyncio.run(validate_dataset(root, ImageCache(docker.from_env(), kinds=DomainKinds()),
                                        Path(sys.argv[4]), journal=journal,
                                        progress=progress))
for t in tasks:
    print(t.source.name, t.how, t.report.reason)
"""


def _dataset(root: Path) -> Path:
    for i in range(3):
        task = root / f"motd-{i}"
        shutil.copytree(TASKS / "prebuilt-image", task)
        (task / "instruction.md").write_text((task / "instruction.md").read_text() + f"(copy {i})\n")
    shutil.copytree(root / "motd-0", root / "motd-0-again")  # identical content: validated once
    return root


@pytest.mark.docker
def test_an_import_killed_midway_resumes_without_redoing_finished_tasks(tmp_path) -> None:
    pytest.importorskip("docker").from_env().images.get("aes-base:latest")
    root = _dataset(tmp_path / "ds")
    journal, log1, log2 = tmp_path / "journal.jsonl", tmp_path / "first.log", tmp_path / "second.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(ROOT / p) for p in ("proto", "libs", "services"))}
    cmd = [sys.executable, "-c", _RUN, str(root), str(journal)]
    first = subprocess.Popen([*cmd, str(log1), str(tmp_path / "s1")], env=env, stdout=subprocess.PIPE)
    deadline = time.monotonic() + 600
    while not (journal.is_file() and journal.read_text().count("\n") >= 1):
        assert first.poll() is None and time.monotonic() < deadline, "the first run ended before finishing a task"
        time.sleep(0.2)
    first.send_signal(signal.SIGKILL)
    first.wait()
    finished = {json.loads(line)["report"]["task"] for line in journal.read_text().splitlines()}
    assert finished  # at least one task was done before the kill
    second = subprocess.run([*cmd, str(log2), str(tmp_path / "s2")], env=env, capture_output=True, text=True,
                            timeout=900)
    assert second.returncode == 0, second.stderr
    rows = {line.split()[0]: line.split()[1:] for line in second.stdout.splitlines()}
    assert all(reason == "ok" for _, reason in rows.values()), rows
    redone = {line.split()[0] for line in log2.read_text().splitlines()} if log2.exists() else set()
    resumed = {name for name, (how, _) in rows.items() if how == "resumed"}
    assert resumed and not (resumed & redone)  # nothing the journal holds ran again
    assert rows["motd-0-again"][0] in ("duplicate", "resumed") and "motd-0-again" not in redone
    assert len(journal.read_text().splitlines()) == 3  # one line per distinct task, none twice


@pytest.mark.docker
def test_validate_a_dataset_folder_prechecks_dedupes_journals_and_reports(tmp_path, capsys) -> None:
    from aes_cli.main import main

    pytest.importorskip("docker").from_env().images.get("aes-base:latest")
    root = _dataset(tmp_path / "ds")
    shutil.rmtree(root / "motd-2")
    shutil.copytree(TASKS / "windows", root / "windows")
    journal, report = tmp_path / "journal.jsonl", tmp_path / "report.json"
    args = ["validate", str(root), "--journal", str(journal), "--report", str(report)]
    assert main(args) == 1  # the Windows task is unsupported
    out = capsys.readouterr().out
    # The pre-check table comes before anything is built.
    assert out.index("4 tasks: 3 build, 1 unsupported; 1 identical to another") < out.index("ORACLE")
    doc = json.loads(report.read_text())
    assert {Path(t["source"]).name: (t["how"], t["reason"]) for t in doc["tasks"]} == {
        "motd-0": ("validated", "ok"), "motd-0-again": ("duplicate", "ok"), "motd-1": ("validated", "ok"),
        "windows": ("prechecked", "unsupported")}
    assert main(args) == 1  # again: nothing is rebuilt or rerun
    assert {Path(t["source"]).name: t["how"] for t in json.loads(report.read_text())["tasks"]} == {
        "motd-0": "resumed", "motd-0-again": "resumed", "motd-1": "resumed", "windows": "prechecked"}
    assert "3 resumed from" in capsys.readouterr().out
