"""Chaos suite (``make chaos``): admission under SIGKILLs, bus restarts, store outages and poison.

    .venv/bin/python bench/chaos.py --candidates 100 --kills 30

Starts its own nats-server (JetStream, file store, auth, one fixed port), a SeaweedFS S3
server (``weed mini``) as the blob store, a replayed model that always gives up (a stand-in
for a hosted solver endpoint: calibration is quick and decides ``too_hard``), and the
admission services as separate processes (``aes service NAME``): two validator replicas,
contamination, reset, calibrator and pool, on the route validate,contamination,reset,calibrate.

It publishes N distinct candidates built from one small task template (one shared
``environment/`` so the validator's image cache makes builds cheap; the instruction varies,
so every env_id differs): ~10% garbage bundles (rejected at validate), ~75% that copy a
registered held-out instruction (rejected by contamination), ~15% that pass the gates and
are calibrated. It also publishes poison messages (random bytes) on aes.candidate.validate
and aes.result.calibration. While candidates are in flight it SIGKILLs a random service
every few seconds (restarting it), sometimes nats-server (restarted on the same store dir
and port), stops the store for a short outage (SIGSTOP/SIGCONT) and once for longer than a
stage budget (a hung read).

At the end every candidate must have exactly one final result on aes.result.calibration,
or dead letters that explain it: lost = neither, doubled = more than one result message
stored (counted per candidate from the stream, so JetStream's dedupe cannot hide a double
that got through). Every dead letter must carry an error and a fault; poison must come
back as ``malformed``. Prints a table and writes bench/results/chaos.md.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import collections
import contextlib
import dataclasses
import datetime
import hashlib
import json
import os
import platform
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "replay"))  # the replay model server (a stand-in for a hosted model)

import msgspec  # noqa: E402
import nats  # noqa: E402
import nats.js.errors  # noqa: E402
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy  # noqa: E402

from aes_proto import subjects  # noqa: E402
from aes_proto.codec import MessageError, decode  # noqa: E402
from aes_proto.messages import CalibrationResult, CandidateEnv, DeadLetter, Lineage  # noqa: E402
from aes_ops.localinfra import find_binary, free_ports  # noqa: E402

ROUTE = ("validate", "contamination", "reset", "calibrate")
SERVICES = {"validator": 2, "contamination": 1, "reset": 1, "calibrator": 1, "pool": 1}
"""Service name -> replicas (each replica its own process)."""
GIVE_UP = "TASK_DONE"

HELDOUT = (
    "Write a bash script that rotates the nginx access logs every night, compresses the old ones "
    "with gzip and keeps exactly fourteen days of history in /var/log/nginx/archive, then reports "
    "how many archives were removed on standard output."
)
WORDS = ("amber", "birch", "cobalt", "dune", "ember", "fjord", "garnet", "harbor", "indigo", "juniper",
         "kelp", "lumen", "marble", "nectar", "onyx", "pewter", "quartz", "russet", "sable", "tundra")

TASK_TOML = """schema_version = "1.4"

[task]
name = "aes-chaos/{name}"
description = "Chaos-suite candidate."

[agent]
timeout_sec = 60.0

[verifier]
timeout_sec = 60.0

[environment]
build_timeout_sec = 300.0
cpus = 1
memory_mb = 256
allow_internet = false
"""
DOCKERFILE = "FROM aes-base:latest\nWORKDIR /app\n"
"""Shared by every candidate: one image build serves them all."""
TEST_SH = """#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/answer.txt 2>/dev/null)" = "{word}" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
"""
SOLVE_SH = "#!/bin/bash\nprintf '%s\\n' {word} > /app/answer.txt\n"

WEED_PORTS = ["master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port",
              "filer.port.grpc", "s3.port", "s3.port.grpc", "s3.port.iceberg", "s3.port.lance",
              "admin.port", "admin.port.grpc", "webdav.port", "debug.port", "metricsPort",
              "s3.metricsPort", "s3.debug.port"]


def say(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True)


# --- child processes ---------------------------------------------------------------

CHILDREN: list["Child"] = []
SPAWNED_PIDS: set[int] = set()
SPAWNED: list[subprocess.Popen] = []
"""Every process started, restarts included: cleanup reaps each group still alive."""


class Child:
    """One process in its own process group, logging to ``log`` (appended across restarts)."""

    def __init__(self, name: str, argv: list[str], log: Path, env: dict[str, str] | None = None,
                 cwd: Path | None = None) -> None:
        self.name, self.argv, self.log, self.env, self.cwd = name, argv, log, env, cwd
        self.proc: subprocess.Popen | None = None
        self.stopped = False
        self.expected_down = False
        """Set while the harness has killed it and not yet restarted it."""
        self.starts = 0
        CHILDREN.append(self)

    def start(self) -> None:
        with self.log.open("ab") as f:
            f.write(f"\n===== chaos: start #{self.starts + 1} at {time.strftime('%H:%M:%S')}\n".encode())
            self.proc = subprocess.Popen(self.argv, stdout=f, stderr=subprocess.STDOUT, env=self.env,
                                         cwd=self.cwd, start_new_session=True)
        SPAWNED_PIDS.add(self.proc.pid)
        SPAWNED.append(self.proc)
        self.starts += 1
        self.expected_down = False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)

    def kill(self) -> None:
        """SIGKILL the whole process group and reap it."""
        if self.proc is None:
            return
        self.expected_down = True
        if self.stopped:
            self.cont()
        self.signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)

    def stop(self) -> None:
        self.signal(signal.SIGSTOP)
        self.stopped = True

    def cont(self) -> None:
        self.signal(signal.SIGCONT)
        self.stopped = False

    def terminate(self, grace: float = 5.0) -> None:
        if not self.alive():
            return
        if self.stopped:
            self.cont()
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(grace)  # type: ignore[union-attr]
        except subprocess.TimeoutExpired:
            self.kill()

    def tail(self, n: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def cleanup() -> None:
    for c in reversed(CHILDREN):
        with contextlib.suppress(Exception):
            c.cont() if c.stopped else None
    for c in reversed(CHILDREN):
        with contextlib.suppress(Exception):
            c.terminate(grace=3.0)
    for proc in SPAWNED:  # anything a restart left behind
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGCONT)
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
    _reap_containers()


def _reap_containers() -> None:
    """Remove sandbox containers created by our (now dead) service processes."""
    if not SPAWNED_PIDS:
        return
    try:
        import docker

        from aes_lib.sandbox.container import MANAGED_LABEL, OWNER_HOST_LABEL, OWNER_PID_LABEL

        client = docker.from_env()
        host = socket.gethostname()
        for c in client.containers.list(all=True, filters={"label": f"{MANAGED_LABEL}=1"}):
            if c.labels.get(OWNER_HOST_LABEL) == host and c.labels.get(OWNER_PID_LABEL, "").isdigit() \
                    and int(c.labels[OWNER_PID_LABEL]) in SPAWNED_PIDS:
                with contextlib.suppress(Exception):
                    c.remove(force=True)
    except Exception as e:  # cleanup is best effort
        say(f"container cleanup: {e}")


def _container_owners() -> set[int]:
    """Pids owning a running sandbox container on this host (the process is mid-message)."""
    try:
        import docker

        from aes_lib.sandbox.container import MANAGED_LABEL, OWNER_HOST_LABEL, OWNER_PID_LABEL

        client = docker.from_env()
        host = socket.gethostname()
        return {int(c.labels[OWNER_PID_LABEL])
                for c in client.containers.list(filters={"label": f"{MANAGED_LABEL}=1", "status": "running"})
                if c.labels.get(OWNER_HOST_LABEL) == host and c.labels.get(OWNER_PID_LABEL, "").isdigit()}
    except Exception:
        return set()


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def wait_until(check, what: str, child: Child, timeout: float = 60.0) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if not child.alive():
            raise RuntimeError(f"{what} exited with {child.proc.returncode}:\n{child.tail(30)}")  # type: ignore[union-attr]
        with contextlib.suppress(Exception):
            if check():
                return time.monotonic() - t0
        time.sleep(0.1)
    raise RuntimeError(f"{what} not ready after {timeout:.0f}s:\n{child.tail(30)}")


# --- infrastructure ------------------------------------------------------------------


@dataclasses.dataclass
class Infra:
    root: Path
    nats: Child
    nats_port: int
    nats_user: str
    nats_password: str
    weed: Child
    s3_endpoint: str
    s3_access: str
    s3_secret: str
    bucket: str

    @property
    def nats_url(self) -> str:
        return f"nats://127.0.0.1:{self.nats_port}"

    @property
    def blob_url(self) -> str:
        return f"s3://{self.bucket}?endpoint={self.s3_endpoint}&secure=0"

    def settings(self):
        from aes_lib.config import Settings

        return Settings(home=self.root / "home", nats_url=self.nats_url, nats_user=self.nats_user,
                        nats_password=self.nats_password, blob_url=self.blob_url,
                        s3_access_key=self.s3_access, s3_secret_key=self.s3_secret, route=",".join(ROUTE))

    def start_nats(self) -> float:
        self.nats.start()
        return wait_until(lambda: port_open(self.nats_port), "nats-server", self.nats)

    def start_weed(self) -> float:
        from minio import Minio

        self.weed.start()
        client = Minio(self.s3_endpoint, access_key=self.s3_access, secret_key=self.s3_secret, secure=False)
        return wait_until(lambda: client.list_buckets() is not None, "seaweedfs", self.weed, timeout=120)


def start_infra(root: Path) -> Infra:
    logs = root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    # nats-server: JetStream with a file store, auth, one fixed port (a restart reuses it).
    nroot = root / "nats"
    nroot.mkdir()
    user, password = "aes", secrets.token_urlsafe(16)
    (nroot / "nats.conf").write_text(f'authorization {{ user: "{user}", password: "{password}" }}\n')
    [nats_port] = free_ports(1)
    nats_child = Child("nats-server", [find_binary("nats-server"), "-c", str(nroot / "nats.conf"), "-a", "127.0.0.1",
                                       "-p", str(nats_port), "-js", "-sd", str(nroot / "js")], logs / "nats-server.log")
    # SeaweedFS S3 that checks credentials (as tests/conftest.py's s3_server).
    wroot = root / "seaweed"
    (wroot / "data").mkdir(parents=True)
    (wroot / "logs").mkdir()
    access, secret = "aes" + secrets.token_hex(6), secrets.token_urlsafe(24)
    (wroot / "s3.json").write_text(json.dumps({"identities": [{
        "name": "aes", "credentials": [{"accessKey": access, "secretKey": secret}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
    ports = dict(zip(WEED_PORTS, free_ports(len(WEED_PORTS))))
    weed_child = Child("weed", [find_binary("weed"), f"-logdir={wroot / 'logs'}", "mini", f"-dir={wroot / 'data'}",
                                "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-master.telemetry=false", "-webdav=false",
                                "-admin.ui=false", f"-s3.config={wroot / 's3.json'}",
                                *(f"-{k}={v}" for k, v in ports.items())],
                       logs / "weed.log", env={**os.environ, "TMPDIR": str(wroot)}, cwd=wroot)
    infra = Infra(root, nats_child, nats_port, user, password, weed_child, f"127.0.0.1:{ports['s3.port']}",
                  access, secret, "chaos")
    say(f"nats-server on :{nats_port} ready in {infra.start_nats():.1f}s")
    say(f"seaweedfs S3 on {infra.s3_endpoint} ready in {infra.start_weed():.1f}s")
    return infra


def start_model():
    from replay_server import ReplayServer

    class GiveUp(ReplayServer):
        """Answers every request with the solver's give-up reply (no recording to run out)."""

        def _answer(self, body):
            with self._lock:  # counted, not kept: a long run would hold every request body
                self.count = getattr(self, "count", 0) + 1
            return 200, {"id": f"giveup-{self.count}", "object": "chat.completion", "model": self.model,
                         "choices": [{"index": 0, "finish_reason": "stop",
                                      "message": {"role": "assistant", "content": GIVE_UP}}],
                         "usage": {"prompt_tokens": 1, "completion_tokens": 1}}

    server = GiveUp([])
    server.__enter__()
    atexit.register(server.__exit__, None, None, None)
    return server


def service_children(infra: Infra, model_url: str, args: argparse.Namespace) -> list[Child]:
    env = dict(os.environ)
    env.update({
        "AES_HOME": str(infra.root / "home"), "AES_NATS_URL": infra.nats_url, "AES_NATS_USER": infra.nats_user,
        "AES_NATS_PASSWORD": infra.nats_password, "AES_BLOB_URL": infra.blob_url,
        "AES_S3_ACCESS_KEY": infra.s3_access, "AES_S3_SECRET_KEY": infra.s3_secret,
        "AES_MODEL_URL": model_url, "AES_MODEL": "replay", "AES_ROUTE": ",".join(ROUTE),
        "AES_SOLVER_MAX_TURNS": "1", "AES_MAX_REVISIONS": "0", "PYTHONUNBUFFERED": "1",
    })
    if args.validator_budget > 0:
        env["AES_BUDGETS"] = f"validator={args.validator_budget:g}"
    if args.io_deadline > 0:
        env["AES_IO_DEADLINE"] = f"{args.io_deadline:g}"
    for kv in args.env:
        k, _, v = kv.partition("=")
        env[k] = v
    children = []
    for name, replicas in SERVICES.items():
        for r in range(replicas):
            label = f"{name}-{r + 1}" if replicas > 1 else name
            children.append(Child(label, [sys.executable, "-m", "aes_cli.main", "service", name],
                                  infra.root / "logs" / f"{label}.log", env=env, cwd=ROOT))
    return children


# --- candidates --------------------------------------------------------------------


@dataclasses.dataclass
class Candidate:
    index: int
    kind: str
    """``invalid`` (garbage bundle), ``contaminated`` (copies the held-out text), ``pass`` (reaches calibrate)."""
    msg: CandidateEnv

    @property
    def expected(self) -> str:
        return {"invalid": "rejected@validate:invalid_bundle", "contaminated": "rejected@contamination:contaminated",
                "pass": "too_hard@calibrate"}[self.kind]


def service_of(process: str) -> str:
    """``validator-2`` -> ``validator``."""
    base, _, n = process.rpartition("-")
    return base if n.isdigit() and base in SERVICES else process


def outcome(r: CalibrationResult) -> str:
    if r.decision == "rejected":
        v = r.verdicts[-1] if r.verdicts else None
        return f"rejected@{v.stage}:{v.reason}" if v else "rejected@?"
    return f"{r.decision}@calibrate"


def kinds_for(n: int, invalid_frac: float, pass_frac: float, rng: random.Random) -> list[str]:
    n_invalid = max(1, round(n * invalid_frac)) if n >= 3 else 0
    n_pass = max(1, round(n * pass_frac))
    kinds = ["invalid"] * n_invalid + ["pass"] * n_pass
    kinds += ["contaminated"] * (n - len(kinds))
    rng.shuffle(kinds)
    return kinds


def write_task(d: Path, i: int, kind: str, run: str) -> None:
    word = f"{WORDS[i % len(WORDS)]}{i}"
    for sub in ("environment", "solution", "tests"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    (d / "task.toml").write_text(TASK_TOML.format(name=f"c{i:04d}"))
    (d / "environment" / "Dockerfile").write_text(DOCKERFILE)
    text = (f"Candidate {i} of chaos run {run}. Create the file `/app/answer.txt` whose only line is the word "
            f"`{word}`.\n")
    if kind == "contaminated":
        text += f"\nBackground, as seen elsewhere: {HELDOUT}\n"
    (d / "instruction.md").write_text(text)
    (d / "solution" / "solve.sh").write_text(SOLVE_SH.format(word=word))
    (d / "tests" / "test.sh").write_text(TEST_SH.format(word=word))


def build_candidates(settings, n: int, args: argparse.Namespace, work: Path, run: str) -> list[Candidate]:
    from aes_lib.blobstore import open_store
    from aes_lib.bundle import pack

    blobs = open_store(settings.blob_location, settings)
    rng = random.Random(args.seed)
    out = []
    for i, kind in enumerate(kinds_for(n, args.invalid_frac, args.pass_frac, rng)):
        if kind == "invalid":
            data = b"chaos garbage %d " % i + rng.randbytes(200)
            sha = hashlib.sha256(data).hexdigest()
        else:
            d = work / f"c{i:04d}"
            write_task(d, i, kind, run)
            packed = pack(d)
            data, sha = packed.data, packed.sha256
        ref = blobs.put_content("bundles", data, ".tar.gz")
        key = f"chaos-{run}-{i:04d}"
        out.append(Candidate(i, kind, CandidateEnv(
            idempotency_key=key, episode_id=key, env_id=sha, bundle=ref, route=ROUTE,
            lineage=Lineage(assignment_id=f"chaos-{run}-a{i:04d}", category="chaos", mode="prompt"))))
    return out


async def register_heldout(settings) -> None:
    from aes_lib.blobstore import open_store
    from aes_lib.bus import Bus
    from aes_lib.contamination import KV_BUCKET, HeldoutTask, NgramIndex, register, save_index

    index = NgramIndex.build([HeldoutTask("chaos/nginx-logrotate", HELDOUT)])
    ref = save_index(open_store(settings.blob_location, settings), index)
    bus = await Bus.connect(settings, name="chaos-setup")
    async with bus:
        await register(await bus.kv(KV_BUCKET), ref)


# --- the bus side ------------------------------------------------------------------


class Observer:
    """The harness's own connection: publishes with retries, scans streams, reads consumers."""

    def __init__(self, settings) -> None:
        self.settings = settings
        self.bus = None

    async def connect(self) -> None:
        from aes_lib.bus import Bus

        self.bus = await Bus.connect(self.settings, name="chaos")

    async def publish(self, subject: str, msg, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                await self.bus.publish(subject, msg)  # type: ignore[union-attr]
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)

    async def publish_raw(self, subject: str, data: bytes, msg_id: str, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                await self.bus.js.publish(subject, data, headers={"Nats-Msg-Id": msg_id})  # type: ignore[union-attr]
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)

    async def scan(self, subject: str) -> list[tuple[int, bytes]]:
        """(stream sequence, raw bytes) of every message stored on ``subject``."""
        from aes_lib.bus import stream_for

        js = self.bus.js  # type: ignore[union-attr]
        sub = await js.pull_subscribe(subject, stream=stream_for(subject), config=ConsumerConfig(
            deliver_policy=DeliverPolicy.ALL, ack_policy=AckPolicy.NONE, inactive_threshold=30.0))
        out: list[tuple[int, bytes]] = []
        try:
            if (await sub.consumer_info()).num_pending == 0:
                return out
            while True:
                try:
                    msgs = await sub.fetch(256, timeout=2.0)
                except (nats.errors.TimeoutError, asyncio.TimeoutError):
                    return out
                out.extend((m.metadata.sequence.stream, m.data) for m in msgs)
                if msgs[-1].metadata.num_pending == 0:
                    return out
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def consumers_idle(self) -> tuple[bool, dict[str, tuple[int, int]]]:
        """Whether every service consumer has nothing pending or unacknowledged."""
        from aes_lib.bus import stream_for
        from aes_cli.commands.stack import load_service

        state: dict[str, tuple[int, int]] = {}
        for name in SERVICES:
            cls = load_service(name)
            try:
                info = await self.bus.js.consumer_info(stream_for(cls.subject), cls.name)  # type: ignore[union-attr]
            except nats.js.errors.NotFoundError:
                state[name] = (-1, -1)
                continue
            state[name] = (info.num_pending, info.num_ack_pending)
        return all(p == 0 and a == 0 for p, a in state.values()), state


@dataclasses.dataclass
class Tally:
    results: dict[str, list[tuple[int, CalibrationResult]]]
    letters: list[tuple[int, DeadLetter | None, bytes]]
    undecodable_results: int
    intermediate: dict[str, collections.Counter]
    """Subject -> episode -> stored messages (validation/contamination/gate results)."""

    def finished(self, cands: list[Candidate]) -> int:
        eps = {c.msg.episode_id for c in cands}
        dl = {d.episode_id for _, d, _ in self.letters if d is not None}
        return sum(1 for e in eps if e in self.results or e in dl)


async def tally(obs: Observer, cands: list[Candidate], full: bool = False) -> Tally:
    results: dict[str, list[tuple[int, CalibrationResult]]] = collections.defaultdict(list)
    bad = 0
    for seq, data in await obs.scan(subjects.RESULT_CALIBRATION):
        try:
            r = decode(data, CalibrationResult)
        except MessageError:
            bad += 1
            continue
        results[r.episode_id].append((seq, r))
    letters: list[tuple[int, DeadLetter | None, bytes]] = []
    for seq, data in await obs.scan(f"{subjects.DEAD_LETTER_PREFIX}.>"):
        try:
            letters.append((seq, decode(data, DeadLetter), data))
        except MessageError:
            letters.append((seq, None, data))
    inter: dict[str, collections.Counter] = {}
    if full:
        for subj in (subjects.RESULT_VALIDATION, subjects.RESULT_CONTAMINATION, subjects.RESULT_GATE):
            c: collections.Counter = collections.Counter()
            for _, data in await obs.scan(subj):
                with contextlib.suppress(Exception):
                    c[msgspec.msgpack.decode(data).get("episode_id", "")] += 1
            inter[subj] = c
    return Tally(dict(results), letters, bad, inter)


# --- chaos ---------------------------------------------------------------------------


@dataclasses.dataclass
class Event:
    t: float
    what: str
    target: str
    open_candidates: int
    detail: str = ""
    wall: float = dataclasses.field(default_factory=time.time)
    busy: str = ""
    """The victim's consumer at the kill: ``pending/unacked`` (unacked > 0: it had work in hand)."""


class Chaos:
    def __init__(self, infra: Infra, services: list[Child], args: argparse.Namespace, rng: random.Random) -> None:
        self.infra, self.services, self.args, self.rng = infra, services, args, rng
        self.events: list[Event] = []
        self.kills: collections.Counter = collections.Counter()
        self.crashes: list[str] = []
        self.t0 = time.monotonic()
        self.open = 0
        """Candidates without an outcome at the last progress scan."""
        self.observer: Observer | None = None
        self.published = 0
        self.finished = 0
        self.stop = asyncio.Event()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def record(self, what: str, target: str, detail: str = "", busy: str = "") -> None:
        ev = Event(self.now(), what, target, self.open, detail, busy=busy)
        self.events.append(ev)
        extra = f", its consumer pending/unacked {busy}" if busy else ""
        say(f"chaos: {what} {target}{(' ' + detail) if detail else ''} (open candidates: {self.open}{extra})")

    async def victim(self) -> tuple[Child, str]:
        """A random service process; with ``--target busy`` (default), three times in four one
        that is running a sandbox container right now (mid-message), waiting up to a kill
        interval for one to be."""
        want_busy = self.args.target == "busy" and self.rng.random() < 0.75
        give_up = time.monotonic() + (self.args.kill_interval if want_busy else 0)
        while True:
            running = await asyncio.to_thread(_container_owners)
            busy = [c for c in self.services if c.proc is not None and c.proc.pid in running and c.alive()]
            if busy or not want_busy or time.monotonic() > give_up or self.stop.is_set():
                break
            await asyncio.sleep(0.3)
        state: dict[str, tuple[int, int]] = {}
        if self.observer is not None:
            with contextlib.suppress(Exception):
                _, state = await asyncio.wait_for(self.observer.consumers_idle(), 5)
        child = self.rng.choice(busy if want_busy and busy else self.services)
        p, a = state.get(service_of(child.name), (-1, -1))
        note = f"{p}/{a}" if state else "?"
        if child in busy:
            note += ", in a container run"
        return child, note

    async def kill_service(self) -> None:
        child, busy = await self.victim()
        child.kill()
        self.kills[service_of(child.name)] += 1
        self.record("SIGKILL", child.name, busy=busy)
        await asyncio.sleep(self.rng.uniform(0.3, self.args.restart_delay))
        child.start()

    async def kill_nats(self) -> None:
        self.infra.nats.expected_down = True
        self.infra.nats.kill()
        self.kills["nats-server"] += 1
        await asyncio.sleep(self.rng.uniform(0.5, self.args.restart_delay))
        ready = await asyncio.to_thread(self.infra.start_nats)
        self.record("SIGKILL", "nats-server", f"restarted, port open after {ready:.1f}s")

    async def kill_store(self) -> None:
        """SIGKILL SeaweedFS and start it again on the same data dir and ports."""
        self.infra.weed.kill()
        self.kills["seaweedfs"] += 1
        await asyncio.sleep(self.rng.uniform(0.5, self.args.restart_delay))
        ready = await asyncio.to_thread(self.infra.start_weed)
        self.record("SIGKILL", "seaweedfs", f"restarted on the same data dir, S3 answering after {ready:.1f}s")

    async def pause_store(self, seconds: float, what: str) -> None:
        self.infra.weed.stop()
        self.record(what, "seaweedfs", f"SIGSTOP for {seconds:.0f}s")
        try:
            await asyncio.wait_for(self.stop.wait(), seconds)  # cut short when the run stops
        except asyncio.TimeoutError:
            pass
        finally:
            self.infra.weed.cont()
        self.record(f"{what} over", "seaweedfs", "SIGCONT")

    def watch(self) -> None:
        """Restart a service that exited by itself (a supervisor would), and say so."""
        for c in self.services:
            if c.proc is not None and not c.alive() and not c.expected_down:
                code = c.proc.returncode
                last = [ln.strip() for ln in c.tail(60).splitlines() if ln.strip() and not ln.startswith("=====")]
                frames = [ln for ln in last if ln.startswith('File "') and str(ROOT) in ln and "site-packages" not in ln]
                where = f" in {frames[-1]}" if frames else ""
                self.crashes.append(f"{c.name} found exited with {code} at {self.now():.0f}s{where}: "
                                    f"{last[-1][:400] if last else ''}")
                self.record("crashed", c.name, f"exit {code}; restarting. Log tail:\n{c.tail(8)}")
                c.start()
        if self.infra.nats.proc is not None and not self.infra.nats.alive() and not self.infra.nats.expected_down:
            self.crashes.append(f"nats-server exited with {self.infra.nats.proc.returncode} at {self.now():.0f}s")
            self.record("crashed", "nats-server", "restarting")
            self.infra.start_nats()

    async def run(self, stop: asyncio.Event) -> None:
        self.stop = stop
        a = self.args
        plan = ["kill"] * a.kills
        n_nats = max(1, a.kills // a.nats_every) if a.kills else 0
        for j in range(n_nats):  # spread nats-server kills over the run
            plan[min(len(plan) - 1, (j + 1) * len(plan) // (n_nats + 1))] = "nats"
        plan.insert(len(plan) // 3, "outage")
        plan.insert(2 * len(plan) // 3, "hung")
        for j in range(a.store_kills):
            plan.insert((j + 1) * len(plan) // (a.store_kills + 1), "store-kill")
        await asyncio.sleep(a.first_kill_after)
        for step in plan:
            if stop.is_set():
                return
            if step == "kill":
                await self.kill_service()
            elif step == "nats":
                await self.kill_nats()
            elif step == "outage":
                await self.pause_store(a.outage, "store outage")
            elif step == "hung":
                await self.pause_store(a.hung_read, "hung read")
            elif step == "store-kill":
                await self.kill_store()
            try:
                await asyncio.wait_for(stop.wait(), self.rng.uniform(0.5, 1.5) * a.kill_interval)
            except asyncio.TimeoutError:
                pass


# --- main ----------------------------------------------------------------------------


def chaos_seconds(args: argparse.Namespace) -> float:
    """About how long the chaos schedule runs."""
    return args.first_kill_after + (args.kills + 2) * (args.kill_interval + args.restart_delay / 2) \
        + args.outage + args.hung_read


async def main_async(args: argparse.Namespace, root: Path) -> int:
    t_start = time.monotonic()
    rng = random.Random(args.seed)
    run = secrets.token_hex(3)
    say(f"chaos run {run}: {args.candidates} candidates, {args.kills} kills, root {root}")
    infra = await asyncio.to_thread(start_infra, root)
    settings = infra.settings()
    model = start_model()
    say(f"replay model (always gives up) at {model.url}")

    await register_heldout(settings)
    cands = await asyncio.to_thread(build_candidates, settings, args.candidates, args, root / "tasks", run)
    by_kind = collections.Counter(c.kind for c in cands)
    say(f"built and stored {len(cands)} candidates: " + ", ".join(f"{k} {v}" for k, v in sorted(by_kind.items())))

    services = service_children(infra, model.url, args)
    for c in services:
        c.start()
    obs = Observer(settings)
    await obs.connect()
    # Wait until every service has bound its consumer before anything is published.
    t_ready = time.monotonic()
    while True:
        _, state = await obs.consumers_idle()
        if all(v != (-1, -1) for v in state.values()):
            break
        for c in services:
            if not c.alive():
                raise RuntimeError(f"{c.name} exited during start-up:\n{c.tail(30)}")
        if time.monotonic() - t_ready > 120:
            raise RuntimeError(f"services not ready after 120s: {state}")
        await asyncio.sleep(0.5)
    say(f"{len(services)} service processes consuming after {time.monotonic() - t_ready:.1f}s")

    poison: dict[bytes, str] = {}
    for j in range(args.poison):
        subject = subjects.stage("validate") if j % 2 == 0 else subjects.RESULT_CALIBRATION
        data = b"\xc1chaos poison " + rng.randbytes(32)  # 0xc1 is never valid msgpack
        poison[data] = subject
        await obs.publish_raw(subject, data, f"chaos-{run}-poison-{j}")
    t_pub = time.monotonic()
    # Candidates are fed over most of the chaos, so that every kill finds work in flight.
    span = args.publish_over if args.publish_over >= 0 else 0.8 * chaos_seconds(args)
    say(f"publishing {len(cands)} candidates over {span:.0f}s; {len(poison)} poison messages published")

    async def feed() -> None:
        for i, c in enumerate(cands):
            await asyncio.sleep(max(0.0, t_pub + span * i / max(1, len(cands)) - time.monotonic()))
            await obs.publish(subjects.stage("validate"), c.msg)
            chaos.published += 1
            chaos.open = chaos.published - chaos.finished
        say(f"all {len(cands)} candidates published after {time.monotonic() - t_pub:.0f}s")

    chaos = Chaos(infra, services, args, rng)
    feeder = asyncio.create_task(feed())
    chaos.t0 = t_pub
    chaos.observer = obs
    stop = asyncio.Event()
    chaos_task = asyncio.create_task(chaos.run(stop))
    deadline = t_start + args.time_limit
    last_change, last_finished, idle_since = time.monotonic(), -1, None
    timed_out = quiet = False
    t = None
    while True:
        await asyncio.sleep(args.progress)
        chaos.watch()
        try:
            t = await tally(obs, cands)
            idle, state = await obs.consumers_idle()
        except Exception as e:  # the bus may be restarting
            say(f"progress: bus unavailable ({type(e).__name__}: {e})")
            continue
        finished = t.finished(cands)
        chaos.finished = finished
        chaos.open = chaos.published - finished
        if finished != last_finished:
            last_change, last_finished = time.monotonic(), finished
        pend = " ".join(f"{k}={p}/{a}" for k, (p, a) in state.items())
        say(f"progress {chaos.now():5.0f}s: outcomes {finished}/{len(cands)}, dead letters {len(t.letters)}, "
            f"kills {sum(chaos.kills.values())} {dict(chaos.kills)}; pending/unacked {pend}")
        chaos_done = chaos_task.done() and feeder.done()
        if finished == len(cands) and chaos_done and idle:
            idle_since = idle_since or time.monotonic()
            if time.monotonic() - idle_since >= args.settle:
                break
        else:
            idle_since = None
        if time.monotonic() > deadline:
            say(f"time limit {args.time_limit:.0f}s reached")
            timed_out = True
            break
        if chaos_done and time.monotonic() - last_change > args.quiet_timeout and not (finished == len(cands) and idle):
            say(f"no progress for {args.quiet_timeout:.0f}s after the chaos ended")
            quiet = True
            break
    stop.set()
    feeder.cancel()
    with contextlib.suppress(BaseException):
        await chaos_task
    with contextlib.suppress(BaseException):
        await feeder
    # Final reading, with every service still up (a pending redelivery shows as unacked).
    for _ in range(30):
        try:
            t = await tally(obs, cands, full=True)
            idle, state = await obs.consumers_idle()
            break
        except Exception as e:
            say(f"final tally: {type(e).__name__}: {e}; retrying")
            await asyncio.sleep(2)
    elapsed = time.monotonic() - t_start
    report = Report(args, run, cands, t, chaos, poison, elapsed, timed_out, quiet, state, model, root / "logs")
    text = report.markdown()
    print(report.console(), flush=True)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        say(f"wrote {out}")
    with contextlib.suppress(Exception):
        await obs.bus.close()  # type: ignore[union-attr]
    if report.problems:
        args.keep = True
    return 0 if report.ok else 1


class Report:
    def __init__(self, args, run, cands, t: Tally, chaos: Chaos, poison, elapsed, timed_out, quiet, state, model,
                 logs: Path):
        self.args, self.run, self.cands, self.t, self.chaos = args, run, cands, t, chaos
        self.failures, self.failure_examples, self.log_notes = scan_logs(logs)
        self.poison, self.elapsed, self.timed_out, self.quiet, self.state = poison, elapsed, timed_out, quiet, state
        self.model_requests = getattr(model, "count", 0)
        eps = {c.msg.episode_id: c for c in cands}
        self.letters_by_ep: dict[str, list[tuple[int, DeadLetter]]] = collections.defaultdict(list)
        self.poison_letters: list[tuple[int, DeadLetter]] = []
        self.other_letters: list[tuple[int, DeadLetter | None]] = []
        for seq, d, raw in t.letters:
            if d is None:
                self.other_letters.append((seq, None))
            elif d.data in poison:
                self.poison_letters.append((seq, d))
            elif d.episode_id in eps:
                self.letters_by_ep[d.episode_id].append((seq, d))
            else:
                self.other_letters.append((seq, d))
        self.rows = []
        self.lost, self.doubled, self.dead, self.wrong = [], [], [], []
        for c in cands:
            ep = c.msg.episode_id
            res = t.results.get(ep, [])
            dl = self.letters_by_ep.get(ep, [])
            if not res and not dl:
                self.lost.append(c)
            if len(res) > 1:
                self.doubled.append(c)
            if dl and not res:
                self.dead.append(c)
            if res and any(outcome(r) != c.expected for _, r in res):
                self.wrong.append(c)
        self.unexplained = [(s, d) for s, d in [(s, d) for v in self.letters_by_ep.values() for s, d in v]
                            + self.poison_letters + [x for x in self.other_letters if x[1] is not None]
                            if not d.error.strip() or not getattr(d, "fault", "")]
        self.unexplained += [x for x in self.other_letters if x[1] is None]
        self.poison_missing = [p for p in poison if not any(d.data == p for _, d in self.poison_letters)]
        self.poison_wrong_fault = [(s, d) for s, d in self.poison_letters if getattr(d, "fault", "") != "malformed"]
        self.inter_doubles = {subj: sum(1 for ep, n in c.items() if n > 1 and ep in eps)
                              for subj, c in t.intermediate.items()}

    @property
    def problems(self) -> bool:
        """Anything worth keeping the logs for."""
        return not self.ok or bool(self.chaos.crashes or self.wrong or self.dead or self.log_notes)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.doubled or self.unexplained or self.poison_missing or self.poison_wrong_fault
                    or self.timed_out)

    def counts(self) -> list[tuple[str, object]]:
        kills = self.chaos.kills
        return [
            ("candidates", f"{len(self.cands)} ({', '.join(f'{k} {v}' for k, v in sorted(collections.Counter(c.kind for c in self.cands).items()))})"),
            ("with exactly one final result", sum(1 for c in self.cands if len(self.t.results.get(c.msg.episode_id, [])) == 1)),
            ("lost (no result, no dead letter)", len(self.lost)),
            ("doubled (more than one final result stored)", len(self.doubled)),
            ("dead-lettered (no final result)", len(self.dead)),
            ("final result other than the expected one", len(self.wrong)),
            ("dead letters, total", len(self.t.letters)),
            ("  of poison messages (expected: malformed)", f"{len(self.poison_letters)} of {len(self.poison)} poison published"),
            ("  concerning candidates", sum(len(v) for v in self.letters_by_ep.values())),
            ("  other", len(self.other_letters)),
            ("dead letters without error or fault", len(self.unexplained)),
            ("poison not dead-lettered / not `malformed`", f"{len(self.poison_missing)} / {len(self.poison_wrong_fault)}"),
            ("undecodable messages on aes.result.calibration (the poison)", self.t.undecodable_results),
            ("doubled intermediate results (validation / contamination / gate)",
             " / ".join(str(self.inter_doubles.get(s, 0)) for s in (subjects.RESULT_VALIDATION, subjects.RESULT_CONTAMINATION, subjects.RESULT_GATE))),
            ("kills", f"{sum(kills.values())}: " + ", ".join(f"{k} {v}" for k, v in sorted(kills.items()))),
            ("store outages / hung reads", f"{sum(1 for e in self.chaos.events if e.what == 'store outage')} "
                                          f"({self.args.outage:.0f}s) / {sum(1 for e in self.chaos.events if e.what == 'hung read')} ({self.args.hung_read:.0f}s)"),
            ("services that exited by themselves", len(self.chaos.crashes)),
            ("consumers at the end (pending/unacked)", " ".join(f"{k}={p}/{a}" for k, (p, a) in self.state.items())),
            ("solver model requests", self.model_requests),
            ("run time", f"{self.elapsed:.0f}s" + (" (time limit hit)" if self.timed_out else "") + (" (stopped: no progress)" if self.quiet else "")),
            ("verdict", "PASS" if self.ok else "FAIL"),
        ]

    def failure_lines(self) -> list[str]:
        out: list[str] = []
        for (svc, fault), n in sorted(self.failures.items()):
            out.append(f"{svc} {fault}: {n}")
            out += [f"  e.g. {line}" for line in self.failure_examples.get((svc, fault), [])]
        return (out or ["(none)"]) + self.log_notes

    def console(self) -> str:
        rows = self.counts()
        w = max(len(k) for k, _ in rows)
        lines = ["", "=" * 72, f"chaos run {self.run}"] + [f"  {k:<{w}}  {v}" for k, v in rows]
        lines += ["", "dead letters by fault:"] + [f"  {line}" for line in self.letter_lines()]
        lines += ["", "failed deliveries (redelivered) by service and fault, from the service logs:"]
        lines += [f"  {line}" for line in self.failure_lines()]
        lost = "UNFINISHED (time limit)" if self.timed_out else "LOST"
        for title, group in ((lost, self.lost), ("DOUBLED", self.doubled), ("WRONG OUTCOME", self.wrong)):
            for c in group:
                lines.append(f"  {title}: {self.describe(c)}")
        lines += [f"  CRASH: {c}" for c in self.chaos.crashes]
        return "\n".join(lines)

    def describe(self, c: Candidate) -> str:
        res = self.t.results.get(c.msg.episode_id, [])
        dl = self.letters_by_ep.get(c.msg.episode_id, [])
        got = ", ".join(f"seq {s} {outcome(r)} key={r.idempotency_key}" for s, r in res) or "no result"
        dls = "; ".join(f"dlq {d.consumer} {getattr(d, 'fault', '?')}: {d.error[:160]}" for _, d in dl)
        return f"{c.msg.episode_id} ({c.kind}, expected {c.expected}, env {c.msg.env_id[:12]}): {got}" + (f"; {dls}" if dls else "")

    def letter_lines(self) -> list[str]:
        lines = []
        all_letters = [(s, d, "poison") for s, d in self.poison_letters]
        all_letters += [(s, d, ep) for ep, v in self.letters_by_ep.items() for s, d in v]
        all_letters += [(s, d, "?") for s, d in self.other_letters]
        by_fault: dict[str, list] = collections.defaultdict(list)
        for s, d, who in sorted(all_letters, key=lambda x: x[0]):
            by_fault["undecodable" if d is None else (getattr(d, "fault", "") or "(none)")].append((s, d, who))
        for fault, items in sorted(by_fault.items()):
            lines.append(f"{fault}: {len(items)}")
            for s, d, who in items:
                if d is None:
                    lines.append(f"  seq {s}: undecodable DeadLetter")
                    continue
                err = d.error.replace("\n", " ")[:200]
                cause = "" if who == "poison" else f" [{self.cause(d.created_at)}]"
                lines.append(f"  seq {s}: {who} consumer={d.consumer} subject={d.subject} deliveries={d.deliveries} "
                             f"at {time.strftime('%H:%M:%S', time.localtime(d.created_at))}: {err or '(no error)'}{cause}")
        return lines or ["(none)"]

    def cause(self, wall: float) -> str:
        """The chaos events in the few minutes before ``wall`` (what a dead letter may be explained by)."""
        near = [e for e in self.chaos.events if 0 <= wall - e.wall <= 300 and e.what in ("SIGKILL", "store outage", "hung read")]
        if not near:
            return "no chaos event in the 300s before"
        return "after " + ", ".join(f"{e.what} {e.target} at {e.t:.0f}s" for e in near[-3:])

    def markdown(self) -> str:
        a = self.args
        uname = " ".join(platform.uname())
        mem = _mem_total()
        lines = [
            "# Chaos suite (`make chaos`)",
            "",
            f"`{' '.join(['.venv/bin/python', 'bench/chaos.py', *sys.argv[1:]])}` "
            f"(kill interval ~{a.kill_interval:g}s, nats-server every {a.nats_every}th kill, outage {a.outage:g}s, "
            f"hung read {a.hung_read:g}s, validator budget {a.validator_budget:g}s, {a.poison} poison messages, "
            f"victims: {a.target}, seed {a.seed}" + (f", env {' '.join(a.env)}" if a.env else "") + ")",
            "",
            f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
            f"- machine: {os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0))}), {mem} RAM",
            f"- `uname -a`: {uname}",
            f"- git: {_git_rev()}",
            "- stack: nats-server (JetStream file store, auth, fixed port), SeaweedFS `weed mini` S3 blob store, "
            "replayed solver model that always gives up; services as processes: "
            + ", ".join(f"{k} x{v}" for k, v in SERVICES.items()) + f"; route {','.join(ROUTE)}",
            "",
            "## Counts",
            "",
            "| | |",
            "|---|---|",
        ]
        lines += [f"| {k} | {v} |" for k, v in self.counts()]
        lines += ["", "## Kills and outages", "",
                  "| t (s) | event | target | open candidates | victim's consumer pending/unacked | detail |",
                  "|---|---|---|---|---|---|"]
        for e in self.chaos.events:
            detail = e.detail.splitlines()[0].replace("|", "/") if e.detail else ""
            lines.append(f"| {e.t:.0f} | {e.what} | {e.target} | {e.open_candidates} | {e.busy} | {detail} |")
        lines += ["", "## Dead letters by fault", "", "```", *self.letter_lines(), "```"]
        lines += ["", "## Failed deliveries (redelivered) by service and fault, from the service logs", "",
                  "```", *self.failure_lines(), "```"]
        lost = "UNFINISHED (time limit)" if self.timed_out else "LOST"
        problems = ([f"{lost}: {self.describe(c)}" for c in self.lost] + [f"DOUBLED: {self.describe(c)}" for c in self.doubled]
                    + [f"WRONG OUTCOME: {self.describe(c)}" for c in self.wrong]
                    + [f"CRASH: {c}" for c in self.chaos.crashes])
        lines += ["", "## Problems", ""]
        lines += [f"- {p}" for p in problems] or ["none"]
        lines.append("")
        return "\n".join(lines)


_FAILED = re.compile(r"^(\S+ [\d:]+),\d+ WARNING aes\.bus: (\S+): (delivery \d+ of \S+ failed \((\w+)\).*)$", re.M)
EXAMPLES = 3
"""Log lines quoted per (service, fault)."""


def scan_logs(logs: Path) -> tuple[collections.Counter, dict[tuple[str, str], list[str]], list[str]]:
    """Failed deliveries per (service, fault) from the runner's log lines (with a few
    quoted), and notes on anything else worth a look (tracebacks, unsettled messages)."""
    failures: collections.Counter = collections.Counter()
    examples: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
    notes: list[str] = []
    for path in sorted(logs.glob("*.log")):
        if path.stem in ("nats-server", "weed"):
            continue
        text = path.read_text(errors="replace")
        for m in _FAILED.finditer(text):
            key = (m.group(2), m.group(4))
            failures[key] += 1
            if len(examples[key]) < EXAMPLES:
                examples[key].append(f"{m.group(1)[-8:]} {path.stem}: {m.group(3)[:240]}")
        unsettled = text.count("could not settle")
        if unsettled:
            notes.append(f"{path.stem}: {unsettled} messages could not be settled (ack/nak/dead-letter failed)")
        crashed = text.count("Traceback (most recent call last)")
        if crashed:
            notes.append(f"{path.stem}: {crashed} tracebacks in its log")
    return failures, examples, notes


def _mem_total() -> str:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    return "?"


def _git_rev() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        return rev + (" (with uncommitted changes)" if dirty else "")
    except OSError:
        return "?"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--candidates", type=int, default=100, help="candidates published (default 100)")
    p.add_argument("--kills", type=int, default=30, help="SIGKILLs of services and nats-server (default 30)")
    p.add_argument("--nats-every", type=int, default=6, help="about one kill in this many is nats-server (default 6)")
    p.add_argument("--kill-interval", type=float, default=6.0, help="mean seconds between chaos steps (default 6)")
    p.add_argument("--first-kill-after", type=float, default=5.0, help="seconds after publishing before the first kill")
    p.add_argument("--restart-delay", type=float, default=2.0, help="longest pause before a killed process restarts")
    p.add_argument("--outage", type=float, default=3.0, help="seconds of the short store outage (SIGSTOP)")
    p.add_argument("--hung-read", type=float, default=30.0,
                   help="seconds the store hangs once: longer than the validator's budget (default 30)")
    p.add_argument("--store-kills", type=int, default=1,
                   help="also SIGKILL SeaweedFS this many times (restarted on the same data dir; default 1)")
    p.add_argument("--validator-budget", type=float, default=20.0,
                   help="the validator's delivery budget in seconds, set as AES_BUDGETS=validator=S (0: the built-in)")
    p.add_argument("--io-deadline", type=float, default=0.0,
                   help="AES_IO_DEADLINE for the services: seconds one blob read/write may take (0: the built-in)")
    p.add_argument("--target", choices=("busy", "random"), default="busy",
                   help="busy: kill a process of a service with unacknowledged work when there is one; random: any")
    p.add_argument("--publish-over", type=float, default=-1.0,
                   help="seconds over which the candidates are published (default: most of the chaos schedule)")
    p.add_argument("--poison", type=int, default=4, help="poison messages, alternately on aes.candidate.validate "
                                                         "and aes.result.calibration (default 4)")
    p.add_argument("--invalid-frac", type=float, default=0.10)
    p.add_argument("--pass-frac", type=float, default=0.15)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--progress", type=float, default=10.0, help="seconds between progress lines")
    p.add_argument("--settle", type=float, default=10.0, help="seconds everything must stay idle before the count")
    p.add_argument("--quiet-timeout", type=float, default=400.0,
                   help="after the chaos, stop when no candidate finishes for this long (> the longest ack_wait)")
    p.add_argument("--time-limit", type=float, default=3600.0, help="overall limit in seconds (default 3600)")
    p.add_argument("--env", action="append", default=[], metavar="VAR=VALUE",
                   help="extra environment for the services (e.g. AES_BUDGET_VALIDATOR=20); repeatable")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "chaos.md"),
                   help="markdown report (empty: none)")
    p.add_argument("--workdir", help="keep state and logs here instead of a temporary folder")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder (logs) after the run")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.workdir:
        root = Path(args.workdir).resolve()
        if root.exists() and any(root.iterdir()):
            raise SystemExit(f"--workdir {root} is not empty")
        root.mkdir(parents=True, exist_ok=True)
    else:
        root = Path(tempfile.mkdtemp(prefix="aes-chaos-"))
    atexit.register(cleanup)

    def on_signal(sig, _frame):
        raise KeyboardInterrupt(f"signal {sig}")

    signal.signal(signal.SIGTERM, on_signal)
    code = 1
    try:
        code = asyncio.run(main_async(args, root))
    except KeyboardInterrupt:
        say("interrupted")
        code = 130
    except Exception:
        traceback.print_exc()
        say(f"logs under {root}/logs")
        args.keep = True
    finally:
        cleanup()
        if args.keep or args.workdir or code != 0:
            say(f"state and logs kept under {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
