"""Starts /app/server.py as configured and exercises its HTTP API."""

import hashlib
import json
import os
import stat
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

BASE = "http://127.0.0.1:8088"
SERVER_SHA256 = "d30676896e1336b298356f2696b2d8787f60fcd44ee75a9e30b727bf09dde746"


def request(method: str, path: str, body: bytes | None = None, token: str | None = None):
    req = urllib.request.Request(BASE + path, data=body, method=method)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


@pytest.fixture(scope="module")
def server():
    # A copy the agent left running would hold the port; the check needs one started from the config.
    subprocess.run(["pkill", "-f", "/app/server.py"], check=False)
    time.sleep(0.5)
    # These tests run as root: run only the server as shipped (a copy checked byte for byte),
    # isolated, never a file the solver could have changed.
    code = Path("/app/server.py").read_bytes()
    if hashlib.sha256(code).hexdigest() != SERVER_SHA256:
        pytest.fail("/app/server.py was modified")
    shipped = Path(tempfile.mkdtemp()) / "server.py"
    shipped.write_bytes(code)
    env = {k: v for k, v in os.environ.items() if k != "NOTES_CONFIG"}
    proc = subprocess.Popen(["python3", "-I", str(shipped)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    # Poll for readiness (bounded by attempts, not by measuring time).
    for _ in range(100):
        if proc.poll() is not None:
            pytest.fail(f"server exited: {proc.stdout.read()}")
        try:
            request("GET", "/health")
            break
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("server did not listen on 127.0.0.1:8088")
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture(scope="module")
def token():
    path = Path("/srv/notes-api/token")
    assert path.exists(), "token file missing"
    return path.read_text().strip()


def test_server_code_unmodified():
    assert hashlib.sha256(Path("/app/server.py").read_bytes()).hexdigest() == SERVER_SHA256


def test_health_ok(server):
    status, body = request("GET", "/health")
    assert status == 200, body
    assert json.loads(body)["status"] == "ok"


def test_token_file_owner_only(token):
    assert token
    assert stat.S_IMODE(os.stat("/srv/notes-api/token").st_mode) & 0o077 == 0


def test_note_roundtrip_stored_in_data_dir(server, token):
    status, body = request("POST", "/notes", b"buy milk", token)
    assert status == 201, body
    note_id = json.loads(body)["id"]
    assert request("GET", f"/notes/{note_id}") == (200, b"buy milk")
    assert Path(f"/var/lib/notes-api/{note_id}.txt").read_bytes() == b"buy milk"


def test_rejects_missing_or_wrong_token(server, token):
    assert request("POST", "/notes", b"x")[0] == 401
    assert request("POST", "/notes", b"x", token + "x")[0] == 401


def test_note_size_limit_is_2048(server, token):
    assert request("POST", "/notes", b"a" * 2048, token)[0] == 201
    assert request("POST", "/notes", b"a" * 2049, token)[0] == 413
