"""Each command's common failure, through the installed ``aes``: one line on stderr that says
what to do, no traceback, docs/COMMANDS.md's exit status; ``-v`` shows the traceback instead."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from replay_server import ReplayServer  # a key-protected endpoint, as a hosted API

from aes_cli.errors import Exit
from aes_cli.main import main
from aes_ops.localinfra import free_ports

AES = str(Path(sys.executable).with_name("aes"))
SEED = Path(__file__).resolve().parents[2] / "seeds" / "csv-sales-rollup"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """No stack: an empty AES_HOME and a NATS URL where nothing listens."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AES_") and k != "OPENAI_API_KEY"}
    return {**clean, "AES_HOME": str(tmp_path / "home"), "AES_NATS_URL": f"nats://127.0.0.1:{free_ports(1)[0]}",
            "AES_BLOB_URL": f"file://{tmp_path / 'blobs'}"}


def aes(env: dict[str, str], *args: str, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([AES, *args], env={**env, **extra}, capture_output=True, text=True, timeout=120)


def one_line(done: subprocess.CompletedProcess, code: Exit) -> str:
    """The single stderr line of a failure that exited ``code``."""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == code, (done.returncode, done.stderr)
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


@pytest.mark.parametrize("args", [["status"], ["report", "out.html"], ["dlq", "list"], ["pool", "list"],
                                  ["pool", "seed"]], ids=" ".join)
def test_no_stack(env, args):
    line = one_line(aes(env, *args), Exit.NO_STACK)
    assert line.startswith(f"aes {args[0]}: cannot reach NATS at {env['AES_NATS_URL']}") and "`aes up`" in line


def test_no_docker(env):
    line = one_line(aes(env, "validate", str(SEED), DOCKER_HOST="unix:///nonexistent.sock"), Exit.NO_DOCKER)
    assert line.startswith("aes validate: no Docker engine:") and "DOCKER_HOST" in line


def test_missing_or_bad_paths(env, tmp_path):
    assert one_line(aes(env, "validate", "/no/such/path"), Exit.USAGE) == \
        "aes validate: /no/such/path: no such task folder or bundle"
    assert one_line(aes(env, "validate", str(tmp_path)), Exit.USAGE) == \
        f"aes validate: {tmp_path}: not a task folder (no task.toml) nor a dataset of task folders"
    assert one_line(aes(env, "solve", str(tmp_path)), Exit.USAGE).startswith("aes solve: invalid task: MissingFileError")
    assert one_line(aes(env, "eval", "/no/such/path"), Exit.USAGE) == "aes eval: /no/such/path: no such directory"
    line = one_line(aes(env, "contamination", "check", str(SEED), "--index", str(tmp_path / "none.bin")), Exit.USAGE)
    assert "none.bin" in line


def test_bad_setting_names_the_variable(env):
    assert one_line(aes(env, "status", AES_IO_DEADLINE="soon"), Exit.USAGE).startswith(
        "aes status: AES_IO_DEADLINE: expected a number")


def test_unreachable_endpoint(env):
    url = f"http://127.0.0.1:{free_ports(1)[0]}/v1"
    line = one_line(aes(env, "solve", str(SEED), AES_MODEL_URL=url), Exit.ENDPOINT_UNREACHABLE)
    assert line.startswith(f"aes solve: cannot reach {url}") and "AES_MODEL_URL" in line


def test_rejected_key(env):
    with ReplayServer(["TASK_DONE"], api_key="sk-right") as srv:
        done = aes(env, "solve", str(SEED), AES_MODEL_URL=srv.url, AES_MODEL_API_KEY="sk-wrong")
    line = one_line(done, Exit.KEY_REJECTED)
    assert "refused the API key (HTTP 401)" in line and "AES_MODEL_API_KEY" in line
    assert srv.requests == []  # no episode was attempted


@pytest.mark.parametrize("args", [["-v", "status"], ["status", "-v"]], ids=" ".join)
def test_verbose_shows_the_traceback(env, args):
    done = aes(env, *args)
    assert done.returncode == Exit.NO_STACK
    assert done.stderr.startswith("Traceback") and "BusUnavailableError: cannot reach NATS" in done.stderr


def test_a_bug_is_one_line_pointing_at_verbose(monkeypatch, capsys):
    from aes_cli.commands import proto

    def boom(args):
        raise RuntimeError("boom\nwith a second line")

    monkeypatch.setattr(proto, "_schema", boom)
    assert main(["proto", "schema"]) == Exit.BUG
    out, err = capsys.readouterr()
    assert out == "" and err == "aes proto: internal error: RuntimeError: boom (run with -v for the traceback)\n"
    assert main(["proto", "schema", "-v"]) == Exit.BUG
    assert "Traceback" in capsys.readouterr().err


def test_interrupted(monkeypatch, capsys):
    from aes_cli.commands import proto

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(proto, "_schema", interrupted)
    assert main(["proto", "schema"]) == Exit.INTERRUPTED == 130
    assert capsys.readouterr().err == "aes proto: interrupted\n"


def test_a_closed_pipe_ends_quietly():
    # As in `aes proto schema | head -c 0`: the reader is gone before anything is written.
    r, w = os.pipe()
    os.close(r)
    try:
        done = subprocess.run([AES, "proto", "schema"], stdout=w, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(w)
    assert (done.returncode, done.stderr) == (Exit.PIPE_CLOSED, "")
