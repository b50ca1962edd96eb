"""``task.toml``: every field of Harbor 0.26's task model, typed.

What Harbor accepts is accepted here, with three kinds of difference:

- Fields Harbor does not model (``[task] format``, ``workstream``...) are kept, never an
  error: :meth:`TaskConfig.warnings` lists them by dotted path (``TaskConfig.extras`` holds
  their values), and ``aes validate`` and the proposer's ``check`` tool print them.
- Values this sandbox executes keep stricter checks than Harbor's: positive timeouts and
  resources, environment variable names, an absolute ``workdir``, a known value of every
  enumerated field. Wrong types raise :class:`InvalidFieldError` (a string for a number is not
  converted); a file that is not TOML raises :class:`TomlSyntaxError`.
- Harbor features this sandbox does not run yet (wildcard and IPv6 allow-list entries, collect hooks in sidecars, TPUs, Windows containers) parse fine;
  :meth:`TaskConfig.unsupported` names those a task needs, and validation answers
  ``unsupported`` for it. Features that only help an agent or a report (MCP servers,
  skills, healthchecks, per-phase network overrides) are accepted and noted in
  the warnings as not applied.

One deliberate difference in defaults: Harbor gives a task the public network unless told
otherwise; here the network is off unless ``allow_internet = true`` or ``network_mode =
"public"``. An operator may let imported human-written datasets follow Harbor's default
(``AES_IMPORTED_NETWORK``, see :mod:`aes_lib.bundle.imported`); a task never grants it to
itself by leaving the field out.
"""

from __future__ import annotations

import ipaddress
import re
import tomllib
from typing import Annotated, Any, Literal

import msgspec
import msgspec.inspect as mi

from aes_lib.bundle.errors import InvalidFieldError, TomlSyntaxError

PositiveFloat = Annotated[float, msgspec.Meta(gt=0)]
PositiveInt = Annotated[int, msgspec.Meta(gt=0)]
EnvVars = dict[Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")], str]
NetworkMode = Literal["public", "no-network", "allowlist"]
"""Harbor's network policy: the public network, none, or only ``allowed_hosts``."""

RESERVED_PATHS = (
    # The toolchain and what the loader, shells, Python, git and name lookups read on their own.
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/root", "/boot",
    # The engine's mounts; the verifier's input and output.
    "/proc", "/sys", "/dev", "/run", "/var/run", "/tests", "/logs",
    # The harness's own in the verifier: root's tools (/aes/bin), the image's inputs (/aes/pristine).
    "/aes",
)
"""Paths that never hold results the verifier's container takes from the agent's
(``aes_lib.sandbox.verifier``), nor anything above them."""


def reserved_path(path: str) -> bool:
    """Whether ``path`` (absolute, normalised) is, holds or lies below a reserved path."""
    path = path.rstrip("/") or "/"
    return any(path == r or path.startswith(r + "/") or r.startswith(path.rstrip("/") + "/")
               for r in RESERVED_PATHS)


_NAME_PATTERN = r"^[A-Za-z0-9_\-][A-Za-z0-9_.\-]*/[A-Za-z0-9_\-][A-Za-z0-9_.\-]*$"
_SCHEMA_1X = re.compile(r"^1\.\d+$")
_STEP_NAME = re.compile(r'^[^\x00-\x1f/\\:*?"<>|]{1,255}$')


class _Section(msgspec.Struct, kw_only=True, frozen=True):
    """A table of task.toml. Keys it does not declare are not decoded: ``parse_task_toml``
    records them (``TaskConfig.extras``) before conversion."""


class Author(_Section, frozen=True):
    name: str
    """Author's name."""
    email: str | None = None
    """Author's e-mail address."""


class TaskInfo(_Section, frozen=True):
    """``[task]``: identity of the task as a package."""

    name: Annotated[str, msgspec.Meta(pattern=_NAME_PATTERN)]
    """``org/name``: letters, digits, ``-``, ``_`` and ``.``, neither part starting with a dot."""
    version: Annotated[str, msgspec.Meta(min_length=1)] | None = None
    """Package version, any non-empty string."""
    description: str = ""
    """One-line human description."""
    authors: tuple[Author, ...] = ()
    """Authors as ``{name, email}`` tables."""
    keywords: tuple[str, ...] = ()
    """Search keywords."""


class _PhaseNetwork(_Section, frozen=True):
    network_mode: NetworkMode | None = None
    """A network policy for this phase only (Harbor); not applied here: the container keeps
    the ``[environment]`` policy for both phases (a warning says so)."""
    allowed_hosts: tuple[str, ...] | None = None
    """Hosts reachable under ``network_mode = "allowlist"``."""


class AgentConfig(_PhaseNetwork, frozen=True):
    """``[agent]``: the solver's (or oracle's) turn."""

    timeout_sec: PositiveFloat | None = None
    """Seconds the agent may work; None: the runner's default."""
    user: str | int | None = None
    """User (name or uid) the agent's commands run as; None: the image's USER."""


class HealthcheckConfig(_Section, frozen=True):
    """``[environment.healthcheck]``: a readiness probe (Docker HEALTHCHECK's options). Parsed,
    not run here."""

    command: str
    interval_sec: float = 5.0
    timeout_sec: float = 30.0
    start_period_sec: float = 0.0
    start_interval_sec: float = 5.0
    retries: int = 3


class TpuSpec(_Section, frozen=True):
    """``[environment.tpu]``: a TPU slice. This sandbox has none (``unsupported``)."""

    type: Annotated[str, msgspec.Meta(min_length=1)]
    topology: Annotated[str, msgspec.Meta(pattern=r"^\s*[1-9]\d*(x[1-9]\d*)+\s*$")]
    """``NxM`` or ``NxMxK``."""


class MCPServerConfig(_Section, frozen=True):
    """One ``[[environment.mcp_servers]]``: an MCP server offered to the agent (Harbor). Parsed,
    not offered to agents here (a warning says so)."""

    name: str
    transport: Literal["stdio", "sse", "streamable-http", "http"] = "sse"
    """``http`` is Harbor's alias of ``streamable-http``."""
    url: str | None = None
    """Required for the HTTP transports."""
    command: str | None = None
    """Required for ``stdio``."""
    args: tuple[str, ...] = ()
    headers: dict[str, str] = {}


class ArtifactConfig(_Section, frozen=True):
    """One entry of ``artifacts``: a path collected from the container after the run (Harbor).
    Carried into a separate verifier's container at its own path; ``destination`` (a path on
    Harbor's host) and ``exclude`` are not applied."""

    source: str
    destination: str | None = None
    exclude: tuple[str, ...] = ()
    service: str | None = None


Artifact = str | ArtifactConfig
"""A bare container path, or a table."""


class EnvironmentConfig(_Section, frozen=True):
    """``[environment]``: the container the agent works in."""

    build_timeout_sec: PositiveFloat = 600.0
    """Seconds the image build may take."""
    docker_image: str | None = None
    """Prebuilt image, preferred to environment/Dockerfile as Harbor does: used when present
    locally or pullable; otherwise the Dockerfile is built if there is one, else the build fails."""
    os: Literal["linux", "windows"] = "linux"
    """Container OS (case-insensitive); ``windows`` is ``unsupported`` here."""
    cpus: PositiveFloat | None = None
    """CPU quota; None: the sandbox default. Capped by the sandbox."""
    memory_mb: PositiveInt | None = None
    """Memory limit in MiB; None: the sandbox default. Capped by the sandbox. Harbor's older
    ``memory = "2G"`` is read into it."""
    storage_mb: PositiveInt | None = None
    """Disk the task expects; recorded, not enforced (overlay2 without quotas). Harbor's older
    ``storage = "10G"`` is read into it."""
    gpus: Annotated[int, msgspec.Meta(ge=0)] | None = None
    """GPUs requested; where the Docker engine has no GPU runtime, validation says ``needs_gpu``."""
    gpu_types: tuple[str, ...] | None = None
    """Acceptable GPU models (``["H100", "A100"]``); not matched here: any GPU the engine has."""
    tpu: TpuSpec | None = None
    """A TPU slice; ``unsupported`` here."""
    mcp_servers: tuple[MCPServerConfig, ...] = ()
    """MCP servers for the agent; not offered here."""
    allow_internet: bool = False
    """Whether the container gets a network at all: after parsing, the effective value of
    ``allow_internet`` and ``network_mode`` (``network_mode`` wins, as in Harbor). False when
    neither is set (Harbor's default is true)."""
    network_mode: NetworkMode | None = None
    """Harbor's newer network field: ``public`` (network), ``no-network``, ``allowlist`` (only
    ``allowed_hosts``, where the operator lets imported tasks have a network)."""
    allowed_hosts: tuple[str, ...] | None = None
    """Hosts reachable under ``network_mode = "allowlist"``."""
    env: EnvVars = {}
    """Environment variables of the container."""
    skills_dir: str | None = None
    """Skills for the agent (Harbor); not copied here."""
    healthcheck: HealthcheckConfig | None = None
    """Readiness probe; not run here."""
    workdir: str | None = None
    """Absolute working directory for every exec; None: the image's WORKDIR. A Windows task's
    (``C:\\app``) is kept: the task is ``unsupported`` here, never a field error."""


class VerifierCollectConfig(_Section, frozen=True):
    """One ``[[verifier.collect]]``: a command run after the agent's turn (Harbor). Run here in
    ``main`` (the agent's container) before its files go to the verifier; in another service
    it is ``unsupported``."""

    command: str
    service: str = "main"
    timeout_sec: PositiveFloat = 60.0
    user: str | int | None = None


class VerifierConfig(_PhaseNetwork, frozen=True):
    """``[verifier]``: how tests/test.sh is run."""

    timeout_sec: PositiveFloat = 600.0
    """Seconds tests/test.sh may run."""
    env: EnvVars = {}
    """Environment variables set for the verifier."""
    user: str | int | None = None
    """User the verifier runs as (Harbor); not applied here (a warning says so)."""
    environment_mode: Literal["shared", "separate"] | None = None
    """``shared`` (the verifier sees the agent's final files; this sandbox runs it in a fresh
    container of the same image, see ``aes_lib.sandbox.verifier``) or ``separate`` (its own
    image, and only the artifacts: ``aes_lib.sandbox.artifacts``). None: ``separate`` when
    ``environment`` is set, else shared."""
    environment: EnvironmentConfig | None = None
    """The separate verifier's container."""
    collect: tuple[VerifierCollectConfig, ...] = ()
    """Commands run before the verifier (in ``main``; other services: ``unsupported``)."""

    @property
    def separate(self) -> bool:
        return self.environment_mode == "separate" or (self.environment_mode is None and self.environment is not None)


class SolutionConfig(_Section, frozen=True):
    """``[solution]``: the reference solution's run."""

    env: EnvVars = {}
    """Environment variables set for solution/solve.sh."""


class StepConfig(_Section, frozen=True):
    """One ``[[steps]]`` of a multi-step task (Harbor): run in order in one environment, each
    with steps/<name>/instruction.md and its tests (``aes_lib.sandbox.trial``)."""

    name: Annotated[str, msgspec.Meta(min_length=1)]
    agent: AgentConfig = AgentConfig()
    verifier: VerifierConfig = VerifierConfig()
    min_reward: float | dict[str, float] | None = None
    healthcheck: HealthcheckConfig | None = None
    artifacts: tuple[Artifact, ...] = ()


class TaskConfig(_Section, frozen=True):
    """The whole of task.toml."""

    schema_version: str = "1.4"
    """Harbor task schema version (``1.x``; another value is read as 1.x with a warning).
    Harbor's older name, a top-level ``version``, is read into it."""
    task: TaskInfo | None = None
    """``[task]``; optional as in Harbor."""
    metadata: dict[str, Any] = {}
    """Free-form: difficulty, category, tags, ..."""
    agent: AgentConfig = AgentConfig()
    """``[agent]``: the agent's time limit and user."""
    verifier: VerifierConfig = VerifierConfig()
    """``[verifier]``: how tests/test.sh runs."""
    environment: EnvironmentConfig = EnvironmentConfig()
    """``[environment]``: image build and container resources."""
    solution: SolutionConfig = SolutionConfig()
    """``[solution]``: the reference solution's environment."""
    source: str | None = None
    """Where the task comes from (Harbor: the dataset's name)."""
    multi_step_reward_strategy: Literal["mean", "final"] | None = None
    """How a multi-step task's reward is derived from its steps'."""
    steps: tuple[StepConfig, ...] | None = None
    """``[[steps]]``: a multi-step task."""
    artifacts: tuple[Artifact, ...] = ()
    """Paths collected after the run: the results that reach the verifier besides the workdir
    (``aes_lib.sandbox.verifier``), except reserved ones (``RESERVED_PATHS``: Harbor tasks name
    log folders under /logs), which stay behind."""
    extras: dict[str, Any] = msgspec.field(default_factory=dict, name="__aes_extras__")
    """Fields Harbor does not model, by dotted path (``task.format``, ``version``...): kept,
    never decoded from a key of that name (set by ``parse_task_toml`` only)."""
    notes: tuple[str, ...] = msgspec.field(default=(), name="__aes_notes__")
    """Harbor's older spellings that were read (``memory`` into ``memory_mb``...), as warnings."""

    def warnings(self) -> list[str]:
        """One line per field kept but not applied: fields Harbor does not model, older
        spellings, Harbor features this sandbox accepts without applying them."""
        out = [f"task.toml: {path} is not a Harbor 0.26 field (kept, ignored)" for path in self.extras]
        out += [f"task.toml: {n}" for n in self.notes]
        if not _SCHEMA_1X.match(self.schema_version):
            out.append(f"task.toml: schema_version {self.schema_version!r} is not 1.x; read as 1.x")
        env = self.environment
        ignored = [
            (bool(env.mcp_servers), f"[environment] mcp_servers ({len(env.mcp_servers)}) are not offered to agents by this sandbox"),
            (env.skills_dir is not None, "[environment] skills_dir is not copied for agents by this sandbox"),
            (env.healthcheck is not None, "[environment.healthcheck] is not run by this sandbox"),
            (bool(env.gpu_types), "[environment] gpu_types is not matched: any GPU of the engine is used"),
            (self.verifier.user is not None, "[verifier] user is not applied: tests/test.sh runs as the image's user"),
        ]
        for phase, cfg in (("agent", self.agent), ("verifier", self.verifier)):
            if cfg.network_mode is not None:
                ignored.append((True, f"[{phase}] network_mode is not applied per phase: the container's network "
                                      f"follows [environment] ({'on' if env.allow_internet else 'off'})"))
        out += [f"task.toml: {text}" for cond, text in ignored if cond]
        return out

    def unsupported(self) -> list[str]:
        """What the task needs that this sandbox does not run yet, one line each (empty: nothing)."""
        env, out = self.environment, []
        if sidecar := sorted({h.service for h in self.verifier.collect if h.service != "main"}):
            out.append(f"[[verifier.collect]] hooks in services other than main ({', '.join(sidecar)}) are not run "
                       "by this sandbox yet")
        if self.steps and self.verifier.separate:
            out.append("[[steps]] with a separate verifier are not run by this sandbox yet (each step's tests run "
                       "on the agent's files carried into a fresh container of the same image)")
        if any(step.verifier.collect or step.verifier.environment is not None or step.verifier.environment_mode
               for step in self.steps or ()):
            out.append("[[steps]] verifier settings of their own (collect, environment) are not run by this sandbox yet")
        if env.network_mode == "allowlist" and (odd := [h for h in env.allowed_hosts or () if not _ipv4_or_name(h)]):
            out.append(f"[environment] allowed_hosts {', '.join(odd)}: wildcard names and IPv6 entries are not "
                       "enforced by this sandbox (its allow-list network is IPv4 and filters by address), so the task "
                       "is not run rather than run with less network than it asks")
        if env.os == "windows":
            out.append('[environment] os = "windows" needs Windows containers, which this sandbox does not run')
        if env.tpu is not None:
            out.append(f"[environment] tpu ({env.tpu.type}) needs a TPU, which this sandbox does not have")
        return out


_INTERNAL = {"__aes_extras__", "__aes_notes__"}


def parse_task_toml(text: str) -> TaskConfig:
    """Parse and check task.toml's text; raises one BundleError subclass per problem."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise TomlSyntaxError(f"task.toml: {e}") from e
    notes: list[str] = []
    _read_old_names(data, notes)
    extras: dict[str, Any] = {}
    _collect_extras(data, _TYPE, "", extras)
    for key in _INTERNAL & data.keys():
        del data[key]
    try:
        cfg = msgspec.convert(data, TaskConfig)
    except msgspec.ValidationError as e:  # msgspec names the path in the message
        raise InvalidFieldError(f"task.toml: {e}") from e
    _check_rules(cfg)
    env = _resolve_network(cfg.environment)
    verifier = cfg.verifier
    if verifier.environment is not None:
        verifier = msgspec.structs.replace(verifier, environment=_resolve_network(verifier.environment))
    return msgspec.structs.replace(cfg, environment=env, verifier=verifier, extras=extras, notes=tuple(notes))


def leaves_network_unset(text: str) -> bool:
    """Whether task.toml (valid TOML) says nothing about the network: Harbor would give the
    task the public network, this sandbox gives none."""
    env = tomllib.loads(text).get("environment", {})
    return not (isinstance(env, dict) and env.keys() & {"allow_internet", "network_mode", "allowed_hosts"})


def grant_network(text: str) -> str:
    """task.toml's text with ``allow_internet = true`` added to ``[environment]`` (the text
    must leave the network unset); the rest of the text is kept as written."""
    header = re.search(r"(?m)^[ \t]*\[[ \t]*environment[ \t]*\][ \t]*(#.*)?$", text)
    candidates = []
    if header:
        candidates.append(text[:header.end()] + "\nallow_internet = true" + text[header.end():])
    candidates.append(text.rstrip("\n") + "\n\n[environment]\nallow_internet = true\n")
    candidates.append("environment.allow_internet = true\n" + text)
    for candidate in candidates:
        try:
            if parse_task_toml(candidate).environment.allow_internet:
                return candidate
        except (TomlSyntaxError, InvalidFieldError):
            continue
    raise InvalidFieldError("task.toml: cannot add allow_internet = true to [environment]")


# --- parsing helpers ---------------------------------------------------------------

_TYPE = mi.type_info(TaskConfig)


def _collect_extras(value: Any, t: mi.Type, path: str, out: dict[str, Any]) -> None:
    """Record in ``out`` every key of ``value`` (decoded TOML) that type ``t`` does not declare."""
    if isinstance(t, mi.Metadata):
        _collect_extras(value, t.type, path, out)
    elif isinstance(t, mi.StructType):
        if not isinstance(value, dict):
            return  # a wrong type: conversion reports it
        fields = {f.encode_name: f for f in t.fields if f.encode_name not in _INTERNAL}
        for key, item in value.items():
            sub = f"{path}.{key}" if path else key
            if key in fields:
                _collect_extras(item, fields[key].type, sub, out)
            else:
                out[sub] = item
    elif isinstance(t, mi.UnionType):
        for option in t.types:
            inner = option.type if isinstance(option, mi.Metadata) else option
            if (isinstance(inner, mi.StructType) and isinstance(value, dict)) or (
                    isinstance(inner, (mi.ListType, mi.VarTupleType)) and isinstance(value, list)):
                _collect_extras(value, inner, path, out)
                return
    elif isinstance(t, (mi.ListType, mi.VarTupleType)) and isinstance(value, list):
        for i, item in enumerate(value):
            _collect_extras(item, t.item_type, f"{path}[{i}]", out)


def _size_mb(text: str) -> int:
    """Harbor's older size strings: ``2G``, ``512M``, ``1048576K``."""
    s = text.strip().upper()
    scale = {"G": 1024.0, "M": 1.0, "K": 1 / 1024}.get(s[-1:])
    try:
        if scale is None:
            raise ValueError
        return int(float(s[:-1]) * scale)
    except ValueError:
        raise InvalidFieldError(f"task.toml: size {text!r}: expected a number and G, M or K, like '2G'") from None


def _read_old_names(data: dict[str, Any], notes: list[str]) -> None:
    """Harbor's older spellings, read as Harbor reads them: a top-level ``version`` is the
    schema version; ``memory``/``storage`` size strings become ``memory_mb``/``storage_mb``;
    ``os`` is case-insensitive, transport ``http`` is ``streamable-http``."""
    if "version" in data:
        old = data.pop("version")
        if "schema_version" in data:
            notes.append("top-level version is Harbor's older name of schema_version, which is also set (version ignored)")
        else:
            data["schema_version"] = old
            notes.append("top-level version is Harbor's older name of schema_version (read as schema_version)")
    envs = [data.get("environment"), (data.get("verifier") or {}).get("environment")
            if isinstance(data.get("verifier"), dict) else None]
    for env in envs:
        if not isinstance(env, dict):
            continue
        for old, new in (("memory", "memory_mb"), ("storage", "storage_mb")):
            if old not in env:
                continue
            value = env.pop(old)
            if not isinstance(value, str):
                notes.append(f"[environment] {old} is not a size string (ignored, as Harbor does); use {new}")
                continue
            mb = _size_mb(value)
            if new in env and env[new] != mb:
                raise InvalidFieldError(f"task.toml: [environment] {old} = {value!r} ({mb} MB) contradicts {new} = {env[new]!r}")
            env.setdefault(new, mb)
            notes.append(f"[environment] {old} = {value!r} is Harbor's older spelling of {new} (read as {mb})")
        if isinstance(env.get("os"), str):
            env["os"] = env["os"].lower()
        for server in env.get("mcp_servers") or []:
            if isinstance(server, dict) and server.get("transport") == "http":
                server["transport"] = "streamable-http"


def _check_rules(cfg: TaskConfig) -> None:
    """Harbor's rules across fields, which the types alone do not state."""
    def bad(message: str) -> InvalidFieldError:
        return InvalidFieldError(f"task.toml: {message}")

    if cfg.verifier.environment_mode == "shared" and cfg.verifier.environment is not None:
        raise bad('[verifier] environment_mode = "shared" conflicts with [verifier.environment]')
    phases = [("environment", cfg.environment), ("agent", cfg.agent), ("verifier", cfg.verifier)]
    if cfg.verifier.environment is not None:
        phases.append(("verifier.environment", cfg.verifier.environment))
    for where, section in phases:
        env_os = getattr(section, "os", "linux")
        workdir = getattr(section, "workdir", None)
        if env_os == "linux" and workdir is not None and not workdir.startswith("/"):
            raise bad(f"[{where}] workdir {workdir!r}: expected an absolute path")
        if section.allowed_hosts is not None and section.network_mode != "allowlist":
            raise bad(f'[{where}] allowed_hosts needs network_mode = "allowlist"')
    for i, server in enumerate(cfg.environment.mcp_servers):
        if server.transport == "stdio" and not server.command:
            raise bad(f"$.environment.mcp_servers[{i}]: transport 'stdio' needs a command")
        if server.transport != "stdio" and not server.url:
            raise bad(f"$.environment.mcp_servers[{i}]: transport {server.transport!r} needs a url")
    artifacts = [*cfg.artifacts, *(a for step in cfg.steps or () for a in step.artifacts)]
    for artifact in artifacts:
        source = artifact if isinstance(artifact, str) else artifact.source
        if ".." in source.split("/"):
            raise bad(f"artifact source {source!r} has a '..' component")
    for step in cfg.steps or ():
        # Harbor's rule: one portable folder name under steps/.
        if not _STEP_NAME.match(step.name) or step.name in (".", "..") or step.name.endswith((".", " ")):
            raise bad(f"[[steps]] name {step.name!r}: expected a folder name (no path separators, control or "
                      "reserved characters, or trailing dot or space)")
    names = [step.name.casefold() for step in cfg.steps or ()]
    if len(set(names)) != len(names):
        raise bad("[[steps]] names must be unique")


_HOST_NAME = re.compile(r"(?i)^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*\.?$")


def _ipv4_or_name(host: str) -> bool:
    """Whether an ``allowed_hosts`` entry is an IPv4 address or network, or a plain host name."""
    try:
        ipaddress.IPv4Network(host)
        return True
    except ValueError:
        return bool(_HOST_NAME.match(host)) and ":" not in host


def _resolve_network(env: EnvironmentConfig) -> EnvironmentConfig:
    """``allow_internet`` as the effective policy: ``network_mode`` when set, else
    ``allow_internet`` when set, else off."""
    if env.network_mode is not None:
        return msgspec.structs.replace(env, allow_internet=env.network_mode == "public")
    return env
