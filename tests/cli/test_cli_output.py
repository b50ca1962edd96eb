"""``aes --version``, ``--json`` (one JSON document, nothing else on stdout) and progress
(stderr only: plain lines off a terminal, a rich bar when forced)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aes_cli import output
from aes_lib.config import Settings
from aes_ops.validation import STEPS

AES = str(Path(sys.executable).with_name("aes"))
SEED = Path(__file__).resolve().parents[2] / "seeds" / "csv-sales-rollup"


def aes(settings: Settings, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AES_")}
    env.update(AES_HOME=str(settings.home), AES_NATS_URL=settings.nats_url, AES_NATS_USER=settings.nats_user,
               AES_NATS_PASSWORD=settings.nats_password, AES_BLOB_URL=settings.blob_location)
    done = subprocess.run([AES, *args], env=env, capture_output=True, text=True, timeout=600)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_version():
    done = subprocess.run([AES, "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == f"aes {importlib.metadata.version('autoenvscaling')}\n"


def test_status_json(fresh_nats):
    done = aes(fresh_nats, "status", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["pool"] == 0 and report["pool_by_category"] == {}
    assert report["status"]["candidates"] == 0 and report["status"]["valid_interval"] == [0.0, 1.0]


@pytest.mark.docker
def test_validate_json_with_plain_progress(tmp_path):
    done = aes(Settings(home=tmp_path / "home"), "validate", "--json", str(SEED))
    assert done.returncode == 0, done.stderr
    [report] = json.loads(done.stdout)
    assert report["ok"] and report["reason"] == "ok" and report["oracle_reward"] == 1.0 and report["nop_reward"] < 0.5
    steps = done.stderr.splitlines()
    n = STEPS
    assert steps[0] == f"[validate 1/{n}] {SEED.name}: image built" and steps[-1] == f"[validate {n}/{n}] {SEED.name}: pass"
    assert sorted(s.split(": ", 1)[1].split()[0] for s in steps[1:3]) == ["nop", "oracle"]
    assert steps[3] == f"[validate 4/{n}] {SEED.name}: leak scan: the image holds no test or solution file"
    assert steps[4] == f"[validate 5/{n}] {SEED.name}: tamper probe reward 0"


@pytest.fixture
def mode():
    yield output.set_mode
    output.set_mode("auto")


def test_plain_progress_is_a_line_per_step_on_stderr(mode, capsys):
    mode("plain")
    with output.Progress("demo", total=2) as p:
        p.step("loading", advance=0)
        p.step("first")
        p.step("second")
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == ["[demo 0/2] loading", "[demo 1/2] first", "[demo 2/2] second"]


def test_plain_tracking_prints_about_ten_lines(mode, capsys):
    mode("plain")
    with output.Progress("index") as p:
        assert list(p.track(range(95), "tokenized")) == list(range(95))
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 10 and lines[0] == "[index 10/95] tokenized" and lines[-1] == "[index 95/95] tokenized"


def test_forced_bar_draws_on_stderr_only(mode, capsys):
    mode("bar")
    with output.Progress("demo", total=2) as p:
        p.step("first")
        p.step("second")
    out, err = capsys.readouterr()
    assert out == "" and "demo: second" in err and "2/2" in err and "\x1b[" in err  # drawn, not plain lines
    assert "[demo" not in err
