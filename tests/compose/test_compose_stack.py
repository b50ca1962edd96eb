"""compose.yaml for real: the local images (deploy/images/build.sh), a round through the stack
with a replica killed mid-check, traces in the OTLP receiver, and nothing left after `down -v`.

The model is the only stand-in: two replay servers on this host (proposer and solver), reached
from the containers through host.docker.internal. The round crosses planner -> proposer ->
validator (3 replicas, one SIGKILLed while it runs a sandbox) -> reset -> calibrator -> pool.
The test reads the bus and the receiver through the stack's published (ephemeral) ports.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import docker
import pytest
from replay_server import ReplayServer

from aes_proto import subjects
from aes_proto.messages import CalibrationResult, CandidateEnv, GateResult, ValidationResult

from aes_lib.agents.proposer.files import format_files
from aes_lib.bus import Bus
from aes_lib.bus.deadletters import read_letters
from aes_lib.config import Settings
from aes_lib.runners.pool_store import BUCKET, PoolStore
from aes_lib.sandbox.container import bridge_gateway
from aes_ops.rounds import run_rounds
from aes_ops.seeding import seed_dirs

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.timeout(1500)]

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "seeds" / "csv-sales-rollup"
CANDIDATES = 3
VALIDATORS = 3
SERVICES = ("planner", "proposer", "validator", "reset", "calibrator", "pool")
ROUTE = "validate,reset,calibrate"
UP_TIMEOUT = 300
ROUND_TIMEOUT = 600.0  # a killed validator's message comes back after its ack_wait (60 s)


class Variants(ReplayServer):
    """The proposer's model: each request gets the seed's files with a numbered instruction, so
    every candidate is a distinct bundle (a different env_id)."""

    def _answer(self, body):
        with self._lock:
            self.requests.append(body)
            n = len(self.requests)
        files = {p.relative_to(SEED).as_posix(): p.read_text() for p in sorted(SEED.rglob("*"))
                 if p.is_file() and p.relative_to(SEED).as_posix() != "tests/test.sh"}
        files["instruction.md"] = f"Variant {n} for the compose test.\n\n" + files["instruction.md"]
        return self.completion(body, format_files(files), n)


class Solver(ReplayServer):
    """The solver's model: solves the task in one command, then gives up, alternately."""

    def _answer(self, body):
        with self._lock:
            self.requests.append(body)
            n = len(self.requests)
        solve = (SEED / "solution" / "solve.sh").read_text()
        reply = (f"```bash\ncat > /tmp/solve.sh <<'AES_EOF'\n{solve}\nAES_EOF\nbash /tmp/solve.sh\n```"
                 if n % 2 else "TASK_DONE")
        return self.completion(body, reply, n)


def host_gateway() -> str:
    """The address `host-gateway` names inside containers: the default bridge's gateway."""
    client = docker.from_env()
    try:
        return bridge_gateway(client.networks.get("bridge"))
    finally:
        client.close()


@contextlib.asynccontextmanager
async def exposed(port: int):
    """A TCP relay from the host-gateway address to ``127.0.0.1:port``: ReplayServer listens on
    loopback only, and containers reach this host through that address."""

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    server = await asyncio.start_server(on_client, host_gateway(), 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


class Stack:
    """One compose project of compose.yaml with the local images."""

    def __init__(self, tmp: Path) -> None:
        self.project = f"aes-ct-{uuid.uuid4().hex[:8]}"
        self.secrets = tmp / "secrets.env"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("AES_")}
        self.env.update(
            AES_SECRETS_FILE=str(self.secrets),
            # Empty host ports: ephemeral ones, so the test never collides with another stack.
            AES_NATS_PORT="", AES_S3_PORT="", AES_OTLP_PORT="", AES_JAEGER_UI_PORT="",
            AES_DOCKER_GID=str(os.stat("/var/run/docker.sock").st_gid),
            AES_MODEL="replay", AES_PROPOSER_MODEL="replay", AES_ROUTE=ROUTE, AES_GENERATION_MODE="prompt",
            AES_PROPOSALS_PER_ASSIGNMENT="1", AES_MAX_REVISIONS="0", AES_SOLVER_MAX_TURNS="1",
        )
        self.base = ["docker", "compose", "-p", self.project, "--env-file", str(ROOT / "deploy/images/local.env")]

    def compose(self, *args: str, timeout: float = 120, check: bool = True) -> str:
        p = subprocess.run([*self.base, *args], cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError(f"docker compose {' '.join(args)} exited {p.returncode}:\n{p.stdout}{p.stderr}")
        return p.stdout

    def port(self, service: str, port: int) -> int:
        return int(self.compose("port", service, str(port)).strip().rsplit(":", 1)[1])

    def ids(self, service: str | None = None) -> list[str]:
        return self.compose("ps", "-aq", *([service] if service else [])).split()

    def secret(self, name: str) -> str:
        return dict(line.split("=", 1) for line in self.secrets.read_text().splitlines() if "=" in line)[name]

    def logs(self) -> str:
        return self.compose("logs", "--no-color", "--tail", "40", timeout=60, check=False)


def sandboxes() -> dict[str, str]:
    """Sandbox container id -> the hostname (short container id) of the process that started it."""
    out = subprocess.run(["docker", "ps", "-a", "--filter", "label=aes.managed=1", "--format",
                          '{{.ID}} {{.Label "aes.owner_host"}}'], capture_output=True, text=True, check=True).stdout
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


@pytest.fixture(scope="module")
def images() -> None:
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode != 0:
        pytest.fail("the docker compose plugin is missing: `make infra` (deploy/install_docker.sh) installs it")
    # The round starts no training service: the training image (torch, ~3 minutes to build) is left out.
    subprocess.run(["bash", str(ROOT / "deploy/images/build.sh"), "--no-train"], cwd=ROOT, check=True, timeout=1200)


@pytest.fixture
def stack(images, tmp_path: Path) -> Iterator[Stack]:
    s = Stack(tmp_path)
    subprocess.run(["bash", str(ROOT / "deploy/images/secrets.sh"), str(s.secrets)], check=True)
    try:
        yield s
    finally:
        hosts = {i[:12] for i in s.ids()}
        down = subprocess.run(["bash", str(ROOT / "deploy/images/compose-down.sh"), *s.base[2:]],
                              cwd=ROOT, env=s.env, capture_output=True, text=True, timeout=300)
        assert down.returncode == 0, down.stdout + down.stderr
        print(down.stdout, end="")  # says how many sandboxes of killed replicas it removed
        left = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={s.project}"],
                              capture_output=True, text=True, check=True).stdout.split()
        assert not left, f"containers of {s.project} left after down: {left}"
        orphans = [c for c, owner in sandboxes().items() if owner in hosts]
        assert not orphans, f"sandbox containers of {s.project}'s services left after down: {orphans}"
        volumes = subprocess.run(["docker", "volume", "ls", "-q", "--filter", f"label=com.docker.compose.project={s.project}"],
                                 capture_output=True, text=True, check=True).stdout.split()
        assert not volumes, volumes


async def test_a_round_through_the_compose_stack_survives_a_killed_validator(stack: Stack) -> None:
    with Variants([]) as proposer_model, Solver([]) as solver_model:
        async with exposed(urlsplit(proposer_model.url).port) as p_port, exposed(urlsplit(solver_model.url).port) as s_port:
            stack.env["AES_PROPOSER_MODEL_URL"] = f"http://host.docker.internal:{p_port}/v1"
            stack.env["AES_MODEL_URL"] = f"http://host.docker.internal:{s_port}/v1"
            started = time.monotonic()
            try:
                await asyncio.to_thread(stack.compose, "up", "-d", "--wait", "--scale", f"validator={VALIDATORS}",
                                        "nats", "s3", "otlp", *SERVICES, timeout=UP_TIMEOUT)
            except AssertionError as e:
                raise AssertionError(f"{e}\n{stack.logs()}") from None
            up_s = time.monotonic() - started
            # The installed package finds its own seeds: seed the pool from inside a service container.
            seeded = await asyncio.to_thread(stack.compose, "run", "--rm", "--no-deps", "pool", "pool", "seed")
            assert seeded.startswith(f"seeded {len(seed_dirs())} tasks from /opt/aes/"), seeded

            settings = Settings(
                home=stack.secrets.parent / "home",
                nats_url=f"nats://127.0.0.1:{stack.port('nats', 4222)}",
                nats_user=stack.secret("AES_NATS_USER"), nats_password=stack.secret("AES_NATS_PASSWORD"),
                blob_url=f"s3://aes?endpoint=127.0.0.1:{stack.port('s3', 9000)}&secure=0",
                s3_access_key=stack.secret("AES_S3_ACCESS_KEY"), s3_secret_key=stack.secret("AES_S3_SECRET_KEY"),
            )
            traces_url = f"http://127.0.0.1:{stack.port('otlp', 4318)}"
            validators = {i[:12]: i for i in stack.ids("validator")}
            assert len(validators) == VALIDATORS, validators
            killed: list[str] = []

            async def kill_a_busy_validator() -> None:
                """SIGKILL the first validator seen running a sandbox: its candidate is mid-check."""
                while True:
                    busy = [owner for owner in (await asyncio.to_thread(sandboxes)).values() if owner in validators]
                    if busy:
                        await asyncio.to_thread(subprocess.run, ["docker", "kill", validators[busy[0]]],
                                                check=True, capture_output=True)
                        killed.append(busy[0])
                        return
                    await asyncio.sleep(0.1)

            candidates: set[str] = set()
            lines: list[str] = []
            async with await Bus.connect(settings, name="compose-test") as bus:
                store = PoolStore(await bus.kv(BUCKET))

                async def size() -> int:
                    return len((await store.index()).active)

                def observe(m) -> None:
                    if isinstance(m, CandidateEnv):
                        candidates.add(m.env_id)

                killer = asyncio.create_task(kill_a_busy_validator())
                try:
                    [tracker] = await run_rounds(bus, size, rounds=1, fresh=CANDIDATES, review=False,
                                                 round_timeout=ROUND_TIMEOUT, out=lines.append, observe=observe)
                finally:
                    killer.cancel()
                round_s = time.monotonic() - started - up_s
                assert tracker.done, "\n".join(lines) + "\n" + stack.logs()
                assert killed, "no validator was seen running a sandbox, so none was killed mid-check:\n" + "\n".join(lines)
                assert len(tracker.finished) == CANDIDATES and len(candidates) == CANDIDATES, lines

                # Exactly one result per candidate at each stage that decided it, despite the kill.
                validations = collections.Counter(r.env_id for r in await bus.history(subjects.RESULT_VALIDATION, ValidationResult))
                finals = collections.Counter(r.env_id for r in await bus.history(subjects.RESULT_CALIBRATION, CalibrationResult))
                assert validations == dict.fromkeys(candidates, 1), (validations, lines)
                assert finals == dict.fromkeys(candidates, 1), (finals, lines)
                passed = [r.env_id for r in await bus.history(subjects.RESULT_VALIDATION, ValidationResult) if r.ok]
                resets = collections.Counter(r.env_id for r in await bus.history(subjects.RESULT_GATE, GateResult) if r.gate == "reset")
                assert passed and resets == dict.fromkeys(passed, 1), (resets, passed, lines)
                letters = await read_letters(bus)
                assert not list(letters), [(s.letter.consumer, s.letter.fault, s.letter.error) for s in letters]
                episodes = {r.episode_id for r in await bus.history(subjects.RESULT_CALIBRATION, CalibrationResult)}

    assert not proposer_model.errors and not solver_model.errors
    # One trace per episode, spanning at least four services (exporters batch for ~5 s).
    deadline = time.monotonic() + 60
    while True:
        by_episode, services = get_json(traces_url + "/episodes"), get_json(traces_url + "/traces")
        spans = {e: [set(services.get(t, ())) for t in by_episode.get(e, ())] for e in episodes}
        if all(len(t) == 1 and len(t[0]) >= 4 for t in spans.values()) or time.monotonic() > deadline:
            break
        await asyncio.sleep(1)
    assert all(len(t) == 1 for t in spans.values()), spans
    assert all(len(t[0] & set(SERVICES)) >= 4 for t in spans.values()), spans
    print(f"compose stack: up {up_s:.0f}s, round {round_s:.0f}s, killed validator {killed[0]}, "
          f"traces {spans}")
