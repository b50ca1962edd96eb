"""The embedded stack (``aes up`` / ``aes down``): everything on one machine, no containers.

Under ``AES_HOME``: ``nats/`` (server config, JetStream data, the generated
credential, mode 0600; one config and data folder per server of a cluster), ``blobs/`` (the ``file://`` store), ``logs/<part>.log``,
and ``stack.json`` (pids and connection settings, mode 0600) through which
``Settings.from_env`` in any other shell finds the stack. ``up`` is idempotent:
it starts only what is not already running, so it also revives a dead service.
Data survives ``down``/``up``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from aes_lib.config import STACK_FILE, Settings, parse_fields, sourced
from aes_ops.localinfra import BinaryNotFoundError, find_binary, free_ports

if TYPE_CHECKING:
    from aes_lib.bus import Bus

START_TIMEOUT = 30.0
"""Seconds to wait for nats-server to report its port, and for a cluster to elect its
JetStream leader."""
MODEL_START_TIMEOUT = 180.0
"""Seconds to wait for the local model server to load and report its URL."""
SERVICE_READY_TIMEOUT = 180.0
"""Seconds ``up`` waits for the services it started to be consuming (imports can be slow)."""
STOP_TIMEOUT = 30.0
"""Seconds a service gets to drain after SIGTERM before SIGKILL."""
NATS_USER = "aes"
NATS_CLUSTER = "aes"
"""Name of the JetStream cluster ``aes up --nats-cluster N`` starts."""
MODEL_MARKER = "aes_lib.models."
"""Found in the command line of either local model server (``serve`` or ``torch_serve``)."""
ENGINE_MODULES = {"vllm": "aes_lib.models.vllm_serve", "torch": "aes_lib.models.torch_serve",
                  "gguf": "aes_lib.models.serve"}
"""Module serving each engine kind (``AES_ENGINE``)."""
ENGINE_START_TIMEOUT = {"vllm": 600.0}
"""Engines slower to start than ``MODEL_START_TIMEOUT`` (vLLM: ~30 s on 2 idle cores, minutes when shared)."""

logger = logging.getLogger("aes.stack")


class StackError(RuntimeError):
    """A part of the stack did not start; the message points at its log."""


@dataclasses.dataclass
class StackState:
    """What ``stack.json`` records."""

    settings: dict[str, str]
    """Connection settings other shells need (``nats_url``, credentials, ``model_url``)."""
    nats: list[int]
    """nats-server pids: one, or each server of a cluster."""
    model: int | None = None
    """Local model server pid, when the stack started one."""
    proposer_model: int | None = None
    """The proposer's own engine (separate-models mode), when the stack started one."""
    services: dict[str, int] = dataclasses.field(default_factory=dict)
    """Service name -> pid of its ``aes service NAME`` process."""

    @classmethod
    def load(cls, home: Path) -> "StackState | None":
        try:
            data = json.loads((home / STACK_FILE).read_text())
        except FileNotFoundError:
            return None
        if isinstance(data["nats"], int):  # written before clusters, by a stack still running
            data["nats"] = [data["nats"]]
        return cls(**data)

    def save(self, home: Path) -> None:
        _write_private(home / STACK_FILE, json.dumps(dataclasses.asdict(self), indent=2))


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (it holds the NATS password)."""
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o600)
    tmp.replace(path)


def alive(pid: int | None, marker: str) -> bool:
    """Whether ``pid`` runs and its command line contains ``marker`` (guards against pid reuse)."""
    if not pid:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return marker in cmdline and stat.rsplit(")", 1)[1].split()[0] != "Z"


def _nats_binary() -> str:
    try:
        return find_binary("nats-server")
    except BinaryNotFoundError as e:
        raise StackError(str(e)) from None


def _credential(home: Path) -> str:
    """The stack's NATS password: generated once, kept across restarts."""
    path = home / "nats" / "credentials.json"
    if path.is_file():
        return json.loads(path.read_text())["password"]
    password = secrets.token_urlsafe(24)
    _write_private(path, json.dumps({"user": NATS_USER, "password": password}))
    return password


def _spawn(cmd: list[str], log: Path, env: Mapping[str, str] | None = None) -> subprocess.Popen:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        # A new session: the stack outlives the shell that ran ``aes up``.
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=dict(env) if env is not None else None, start_new_session=True)


def _tail(log: Path, n: int = 20) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def _nats_server(ndir: Path, password: str, i: int, routes: Sequence[int]) -> tuple[Path, str, list[str]]:
    """Config file, config text and arguments of server ``i``: alone when ``routes`` is empty,
    else one of a JetStream cluster whose servers listen for routes on ``routes``. Every
    server picks its client port and reports it in ``ndir/nats-server_<pid>.ports``."""
    auth = f'{{ user: "{NATS_USER}", password: "{password}" }}'
    text = f"authorization {auth}\n"
    conf, store = ndir / "nats.conf", ndir / "js"
    if routes:
        conf, store = ndir / f"nats-{i}.conf", ndir / f"js-{i}"
        # Routes authenticate like clients: nothing else on the machine joins the cluster.
        urls = ", ".join(f"nats-route://{NATS_USER}:{password}@127.0.0.1:{p}" for p in routes)
        text += (f'server_name: "n{i}"\ncluster {{ name: "{NATS_CLUSTER}", listen: "127.0.0.1:{routes[i]}", '
                 f"authorization {auth}, routes: [{urls}] }}\n")
    return conf, text, ["-c", str(conf), "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(store),
                        "--ports_file_dir", str(ndir)]


def _start_nats(home: Path, password: str, n: int) -> list[tuple[int, str]]:
    """Start one server (``n`` = 1) or a cluster of ``n``; (pid, client URL) of each."""
    ndir = home / "nats"
    for stale in ndir.glob("nats-server_*.ports"):
        stale.unlink()
    routes = free_ports(n) if n > 1 else []
    procs: list[tuple[subprocess.Popen, Path]] = []
    for i in range(n):
        conf, text, args = _nats_server(ndir, password, i, routes)
        _write_private(conf, text)
        log = home / "logs" / ("nats.log" if n == 1 else f"nats-{i}.log")
        procs.append((_spawn([_nats_binary(), *args], log), log))
    return [_await_port(proc, ndir, log) for proc, log in procs]


def _await_port(proc: subprocess.Popen, ndir: Path, log: Path) -> tuple[int, str]:
    ports = ndir / f"nats-server_{proc.pid}.ports"
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise StackError(f"nats-server exited with {proc.returncode}; {log}:\n{_tail(log)}")
        try:
            return proc.pid, json.loads(ports.read_text())["nats"][0]
        except (OSError, ValueError, KeyError, IndexError):
            time.sleep(0.05)
    proc.kill()
    raise StackError(f"nats-server did not report its port within {START_TIMEOUT:.0f} s; see {log}")


def _await_jetstream(settings: Settings) -> None:
    """Create the streams once JetStream answers: a new cluster elects its leader (and
    refuses JetStream requests) for a few seconds after its servers listen."""
    _run(_on_bus(settings, None))


async def _on_bus(settings: Settings, action: Callable[[Bus], Awaitable[object]] | None) -> object:
    """``action(bus)`` on a fresh connection, retried until ``START_TIMEOUT`` while JetStream
    refuses or times out: a cluster's stream can be between leaders for a few seconds (longer
    on a loaded machine), and ``up``'s writes are idempotent."""
    import asyncio

    import nats.errors

    from aes_lib.bus import Bus

    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            async with await Bus.connect(settings, name="aes-up") as bus:
                return None if action is None else await action(bus)
        except nats.errors.Error as e:  # JetStream's 503s, "no response from stream" and timeouts alike
            if time.monotonic() > deadline:
                raise StackError(f"JetStream at {settings.nats_url} not ready within {START_TIMEOUT:.0f} s: {e}") from e
            await asyncio.sleep(0.2)


def _run(coro) -> object:
    """Run ``coro`` to the end on a loop of its own thread: ``up`` is synchronous, and its
    callers include coroutines (tests, ``aes run``) whose loop is already running."""
    import asyncio
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="aes-up") as pool:
        return pool.submit(asyncio.run, coro).result()


def _start_model(home: Path, engine: str, env: Mapping[str, str], part: str = "model") -> tuple[int, str]:
    url_file = home / f"{part}.url"
    url_file.unlink(missing_ok=True)
    log = home / "logs" / f"{part}.log"
    if engine not in ENGINE_MODULES:
        raise StackError(f"AES_ENGINE must be one of {sorted(ENGINE_MODULES)}, got {engine!r}")
    proc = _spawn([sys.executable, "-m", ENGINE_MODULES[engine], "--port", "0", "--url-file", str(url_file)], log, env)
    timeout = ENGINE_START_TIMEOUT.get(engine, MODEL_START_TIMEOUT)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise StackError(f"model server exited with {proc.returncode}; {log}:\n{_tail(log)}")
        if url_file.is_file():
            return proc.pid, url_file.read_text().strip()
        time.sleep(0.2)
    proc.kill()
    raise StackError(f"model server did not start within {timeout:.0f} s; see {log}")


SERVICE_MARKER = "aes_cli.main service"
"""In the command line of every service process the stack starts."""


def service_command(target: str, ready_file: Path) -> list[str]:
    """``aes service TARGET`` (a registered name or ``module:Class``) in this interpreter."""
    return [sys.executable, "-m", "aes_cli.main", "service", target, "--ready-file", str(ready_file)]


def up(settings: Settings, services: Mapping[str, str] | None = None, model: bool = True,
       progress: Callable[[str], None] | None = None, nats_cluster: int | None = None) -> Settings:
    """Start whatever part of the stack is not running; returns the stack's ``Settings``.

    ``services`` maps names to ``module:Class`` (default: ``aes_services.registry.SERVICES``);
    ``model=False`` skips the local model server, as does an ``AES_MODEL_URL`` of another server.
    ``progress`` hears of each part in one line as it starts and as it is up.
    ``nats_cluster`` servers form one JetStream cluster keeping ``nats_cluster`` replicas of
    every stream (default: as many as before, else one server). If any server is down, all
    restart (the data stays).
    """
    from aes_services.registry import SERVICES, stack_services

    say = progress or (lambda line: None)
    product = services is None  # a caller's own set (a partial stack) carries its own route
    services = stack_services(settings.engine, settings.policy_mode, settings.route_stages) if services is None else services
    home = settings.home
    for d in ("nats", "logs", "blobs", "run"):
        (home / d).mkdir(parents=True, exist_ok=True)
    password = _credential(home)
    state = StackState.load(home)

    size = nats_cluster or (len(state.nats) if state else 1)
    if state is None or not all(alive(pid, "nats-server") for pid in state.nats):
        old = state
        if old is not None:
            for pid in old.nats:
                _stop(pid, "nats-server", STOP_TIMEOUT)
        servers = _start_nats(home, password, size)
        url = ",".join(u for _, u in servers)
        state = StackState(settings={"nats_url": url, "nats_user": NATS_USER, "nats_password": password,
                                     "stream_replicas": str(size)}, nats=[pid for pid, _ in servers])
        state.save(home)
        _await_jetstream(dataclasses.replace(settings, **parse_fields(Settings, state.settings)))
        if old is not None:
            # Services left from before still retry the dead server's port: replace them.
            for old_pid in old.services.values():
                _stop(old_pid, SERVICE_MARKER, STOP_TIMEOUT)
            if alive(old.model, MODEL_MARKER):
                state.model, state.settings["model_url"] = old.model, old.settings["model_url"]
        state.save(home)
        say(f"nats: started at {url}")
    elif size != len(state.nats):
        raise StackError(f"NATS runs {len(state.nats)} server(s), not {size}: `aes down` first (data is kept)")
    else:
        say(f"nats: running at {state.settings['nats_url']}")
    say(f"blob store: {settings.blob_location}")
    # settings.model_url may be this stack's own (read back from stack.json) or another server's.
    ours = settings.model_url in ("", state.settings.get("model_url"))
    engine_env = {**os.environ, "AES_HOME": str(home), "AES_BLOB_URL": settings.blob_location}
    # Every shell that finds the stack through stack.json agrees on how the policy is served,
    # and on the contamination gate when the user set it (config file, variable or --set);
    # otherwise the gate fails closed, and has the bundled index registered below.
    required = sourced(Settings).get("contamination_required")
    state.settings.update(engine=settings.engine, policy_mode=settings.policy_mode)
    if required is not None:
        state.settings["contamination_required"] = str(int(bool(required.value)))
    else:
        state.settings.pop("contamination_required", None)
    if model and ours and not alive(state.model, MODEL_MARKER):
        say(f"model: loading ({settings.engine} engine)")
        state.model, state.settings["model_url"] = _start_model(home, settings.engine, engine_env)
        state.save(home)
        say(f"model: serving at {state.settings['model_url']}")
    # Separate models: the proposer's policy gets an engine of its own to follow its learner.
    ours = settings.proposer_model_url in ("", state.settings.get("proposer_model_url"))
    if model and ours and settings.policy_mode == "separate" and not alive(state.proposer_model, MODEL_MARKER):
        say(f"proposer model: loading ({settings.engine} engine)")
        state.proposer_model, state.settings["proposer_model_url"] = _start_model(
            home, settings.engine, engine_env, part="proposer-model")
        state.save(home)
        say(f"proposer model: serving at {state.settings['proposer_model_url']}")

    stack_settings = dataclasses.replace(settings, **parse_fields(Settings, state.settings))
    # Before any service consumes, so the gate checks the first candidate against it.
    say("contamination: " + _register_default_index(stack_settings))
    if product:
        _check_route(stack_settings)
    env = {**os.environ, **{f"AES_{k.upper()}": v for k, v in state.settings.items()}, "AES_HOME": str(home)}
    started: dict[str, subprocess.Popen] = {}
    for name, spec in services.items():
        if not alive(state.services.get(name), SERVICE_MARKER):
            target = name if SERVICES.get(name) == spec else spec
            ready = home / "run" / f"{name}.ready"
            ready.unlink(missing_ok=True)
            started[name] = _spawn(service_command(target, ready), home / "logs" / f"{name}.log", env)
            state.services[name] = started[name].pid
            say(f"service {name}: started, pid {started[name].pid}")
    state.save(home)
    _await_services(started, home, say)
    return stack_settings


def _register_default_index(settings: Settings) -> str:
    """Register the bundled held-out index unless one is registered (the user's own stays)."""
    from aes_ops.contamination import register_default

    registered = _run(_on_bus(settings, register_default))
    return "registered the bundled Terminal-Bench index" if registered else "keeping the registered index"


def _check_route(settings: Settings) -> None:
    """Refuse (``RouteConfigError``) a route the stack cannot carry to a decision; a stage
    the built-in services do not consume may be served by a consumer already on the bus."""
    from aes_lib.admission import check_live_route
    from aes_lib.bus import Bus
    from aes_services.registry import builtin_stages

    async def check() -> None:
        async with await Bus.connect(settings, name="aes-route-check") as bus:
            await check_live_route(bus.js, settings.route_stages, builtin_stages(), wait=0)

    _run(check())


def _await_services(started: Mapping[str, subprocess.Popen], home: Path, say: Callable[[str], None]) -> None:
    """Wait until each started service is consuming or has died. A dead one is logged
    with its log's tail and reported by ``health``; it does not stop the others."""
    pending = dict(started)
    deadline = time.monotonic() + SERVICE_READY_TIMEOUT
    while pending and time.monotonic() < deadline:
        for name, proc in list(pending.items()):
            if (home / "run" / f"{name}.ready").exists():
                del pending[name]
                say(f"service {name}: consuming")
            elif proc.poll() is not None:
                del pending[name]
                log_file = home / "logs" / f"{name}.log"
                logger.error("service %s exited with %s; %s:\n%s", name, proc.returncode, log_file, _tail(log_file))
                say(f"service {name}: exited with {proc.returncode}")
        time.sleep(0.1)
    for name in pending:
        logger.warning("service %s is not consuming after %.0f s; see %s", name, SERVICE_READY_TIMEOUT,
                       home / "logs" / f"{name}.log")


def _stop(pid: int | None, marker: str, timeout: float) -> bool:
    if not alive(pid, marker):
        return False
    _kill(pid, signal.SIGTERM)  # type: ignore[arg-type]
    deadline = time.monotonic() + timeout
    while alive(pid, marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    if alive(pid, marker):
        _kill(pid, signal.SIGKILL)  # type: ignore[arg-type]
    return True


def _kill(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # it exited since we looked
        os.kill(pid, sig)


def down(home: Path) -> list[str]:
    """Stop services (they drain), then the model server, then NATS; returns what stopped.
    Data, credentials and logs stay."""
    state = StackState.load(home)
    if state is None:
        return []
    stopped: list[str] = []
    # Services first and together, so they drain in parallel.
    running = {name: pid for name, pid in state.services.items() if alive(pid, SERVICE_MARKER)}
    for pid in running.values():
        _kill(pid, signal.SIGTERM)
    for name, pid in running.items():
        _stop(pid, SERVICE_MARKER, STOP_TIMEOUT)
        stopped.append(name)
    if _stop(state.model, MODEL_MARKER, STOP_TIMEOUT):
        stopped.append("model")
    if _stop(state.proposer_model, MODEL_MARKER, STOP_TIMEOUT):
        stopped.append("proposer-model")
    if any([_stop(pid, "nats-server", STOP_TIMEOUT) for pid in state.nats]):  # stop each, then say
        stopped.append("nats")
    (home / STACK_FILE).unlink(missing_ok=True)
    return stopped


@dataclasses.dataclass(frozen=True)
class Check:
    """One part's health."""

    part: str
    ok: bool
    detail: str
    warning: bool = False
    """Works, but weaker than it should (an admission check off or advisory)."""


async def health(settings: Settings) -> list[Check]:
    """Check NATS (connect with the credential, list streams), every replica's own report of
    stuck handling, the admission checks weaker than the paper's (no held-out index, an
    advisory review), the blob store (write and read back a probe), the model endpoint, and
    each service process of the stack."""
    import asyncio

    from aes_lib.bus import Bus, BusError
    from aes_ops.readout import gaps

    checks: list[Check] = []
    try:
        async with await Bus.connect(settings, name="aes-health") as bus:
            names = [s.config.name for s in await bus.js.streams_info()]
            checks.append(Check("nats", True, f"{settings.nats_url}, {len(names)} streams"))
            checks += await _check_handlers(bus)
            checks += [Check(g.stage, not g.closed, g.text, warning=not g.closed) for g in await gaps(bus)]
    except BusError as e:
        checks.append(Check("nats", False, str(e)))
    checks.append(await asyncio.to_thread(_check_blobs, settings))
    checks.append(await _check_model(settings))
    state = StackState.load(settings.home)
    for name, pid in (state.services if state else {}).items():
        log = settings.home / "logs" / f"{name}.log"
        if not alive(pid, SERVICE_MARKER):
            checks.append(Check(f"service {name}", False, f"not running; {log}"))
        elif not (settings.home / "run" / f"{name}.ready").exists():
            checks.append(Check(f"service {name}", False, f"pid {pid} running but not consuming yet; {log}"))
        else:
            checks.append(Check(f"service {name}", True, f"pid {pid}, consuming; log {log}"))
    return checks


async def _check_handlers(bus) -> list[Check]:
    """A replica that is alive but stuck: deliveries cancelled past their budget, hung I/O."""
    import time

    from aes_lib.bus.health import problems, read_health

    now = time.time()
    return [Check(f"handlers {r.service}", False, f"{r.host} pid {r.pid}: {'; '.join(found)}")
            for r in await read_health(bus) if (found := problems(r, now))]


def _check_blobs(settings: Settings) -> Check:
    from aes_lib.blobstore import BlobError, open_store

    try:
        store = open_store(settings.blob_location, settings)
        ref = store.put_bytes("health/probe", secrets.token_bytes(16))
        store.get_bytes(ref)
    except (BlobError, OSError) as e:
        return Check("blobs", False, f"{settings.blob_location}: {e}")
    except Exception as e:  # S3 client errors have no common base worth importing here
        return Check("blobs", False, f"{settings.blob_location}: {type(e).__name__}: {e}")
    return Check("blobs", True, settings.blob_location)


async def _check_model(settings: Settings) -> Check:
    if not settings.model_url:
        return Check("model", False, "no model endpoint (AES_MODEL_URL unset and no local model server running)")
    import httpx

    try:
        async with httpx.AsyncClient(timeout=5) as client:
            r = await client.get(settings.model_url.rstrip("/") + "/models")
            r.raise_for_status()
    except httpx.HTTPError as e:
        return Check("model", False, f"{settings.model_url}: {e}")
    from aes_lib.models.weights import EngineWeightsError, StaticEngineError, engine_client

    try:  # the engines that follow the learner say which version they serve
        served = f", serves policy v{await engine_client(settings.engine, settings.model_url).version()}"
    except (EngineWeightsError, StaticEngineError):
        served = ""
    return Check("model", True, f"{settings.model_url} ({settings.engine}){served}")
