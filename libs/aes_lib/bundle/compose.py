"""``environment/docker-compose.yaml``: the services a task runs beside its main container.

As in Harbor, the agent's container is the ``main`` service, built from environment/Dockerfile
(or ``docker_image``, or ``main``'s own ``build`` folder below environment/); the file adds
services that ``main`` reaches by name (an app plus its database). ``docker-compose.yml`` is
read too when there is no ``.yaml`` (Harbor 0.26 reads only ``.yaml``: a warning says so).
The file is untrusted, so only what a service needs to run is read, and everything that would
reach past the sandbox is refused with the key named::

    services:
      db:                       # a service name: [a-z0-9][a-z0-9_.-]*
        build: ./db             # a folder below environment/ with a Dockerfile, or
        image: postgres:16      #   an image (local, or pulled where a registry is reachable)
        command: [...]          # entrypoint, environment, working_dir, user: as in compose
        healthcheck: {test: [...], interval: 1s, retries: 30}
        volumes: [pgdata:/var/lib/postgresql/data]        # named volumes only (no host path)
      main:
        build: .                                         # optional: a folder below environment/
        depends_on: {db: {condition: service_healthy}}   # main may set depends_on, environment
    volumes: {pgdata: {}}       # named volumes: one fresh Docker volume per trial, removed after
    networks: {backend: {}}     # accepted: every service is on the trial's one internal network

Every service gets the task's CPU, memory and pid limits and no new privileges; all of them
and ``main`` share an internal network of their own with no way out (``aes_lib.sandbox.services``).
Refused: host mounts (a volume whose source is a path), volumes on ``main``, ports, external
networks, network modes and drivers, privileges and capabilities, devices, namespaces, secrets. Ignored with a warning: ``container_name``,
``restart``, ``expose``, ``labels``, ``deploy`` (limits come from task.toml).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import yaml

from aes_lib.bundle.errors import BundleError

COMPOSE_FILE = "docker-compose.yaml"
COMPOSE_FILES = (COMPOSE_FILE, "docker-compose.yml")
"""Read in this order; Harbor 0.26 reads the first only."""
MAIN = "main"
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Only scalars are ever turned into text: str() of a YAML alias nest (a "billion laughs" list)
# would expand it exponentially.
_SCALAR = (str, int, float, bool)
_READ = {"image", "build", "command", "entrypoint", "environment", "working_dir", "user", "depends_on",
         "healthcheck", "volumes", "networks"}
_MAIN_READ = {"depends_on", "environment", "build", "networks"}
_IGNORED = {"container_name", "restart", "expose", "labels", "deploy", "init", "tty", "stdin_open", "hostname",
            "pull_policy", "stop_grace_period"}
_REFUSED = {
    "volumes_from": "mounts reach other containers",
    "ports": "published ports reach the host", "network_mode": "the network is the sandbox's",
    "extra_hosts": "the network is the sandbox's",
    "dns": "the network is the sandbox's", "links": "the network is the sandbox's",
    "privileged": "no privileges", "cap_add": "no capabilities", "security_opt": "no privileges",
    "devices": "no devices", "device_cgroup_rules": "no devices", "gpus": "no devices",
    "pid": "no host namespaces", "ipc": "no host namespaces", "userns_mode": "no host namespaces",
    "uts": "no host namespaces", "cgroup": "no host namespaces", "cgroup_parent": "limits are the sandbox's",
    "sysctls": "no kernel settings", "ulimits": "limits are the sandbox's", "runtime": "the sandbox's runtime",
    "secrets": "no host files", "configs": "no host files", "env_file": "no host files",
    "shm_size": "limits are the sandbox's", "mem_limit": "limits are the sandbox's", "cpus": "limits are the sandbox's",
}


class InvalidComposeError(BundleError):
    """environment/docker-compose.yaml is not YAML, or asks for what a sandbox does not give."""


@dataclasses.dataclass(frozen=True)
class HealthCheck:
    test: tuple[str, ...]
    """A command (``CMD`` form, or ``CMD-SHELL`` as ``sh -c``) that exits 0 once ready."""
    interval: float = 1.0
    """Seconds between tries."""
    retries: int = 30
    """Failed tries after which the service counts as unhealthy."""


@dataclasses.dataclass(frozen=True)
class Service:
    name: str
    image: str | None = None
    """An image to run; None when ``build`` is set."""
    build: str | None = None
    """A folder below environment/ (relative to it) holding a Dockerfile."""
    command: tuple[str, ...] | str | None = None
    entrypoint: tuple[str, ...] | str | None = None
    environment: dict[str, str] = dataclasses.field(default_factory=dict)
    working_dir: str | None = None
    user: str | None = None
    depends_on: dict[str, str] = dataclasses.field(default_factory=dict)
    """Service -> condition (``service_started`` or ``service_healthy``)."""
    healthcheck: HealthCheck | None = None
    volumes: dict[str, str] = dataclasses.field(default_factory=dict)
    """Named volume (a key of the file's top-level ``volumes``) -> absolute container path."""


@dataclasses.dataclass(frozen=True)
class ComposeSpec:
    services: tuple[Service, ...]
    """In start order: each after the services it depends on."""
    main_depends_on: dict[str, str]
    """What ``main`` waits for: service -> condition."""
    main_environment: dict[str, str]
    """Variables compose sets for ``main`` (task.toml's [environment] env wins)."""
    warnings: tuple[str, ...] = ()
    main_build: str | None = None
    """``main``'s own build folder (relative to environment/, ``.`` for environment/ itself);
    None: environment/Dockerfile or ``docker_image``."""
    volumes: tuple[str, ...] = ()
    """The file's named volumes: each a fresh Docker volume per trial."""


def load_compose(env_dir: Path) -> ComposeSpec | None:
    """The spec of ``env_dir/docker-compose.yaml`` (or ``.yml``); None when the task has none."""
    found = [name for name in COMPOSE_FILES if (env_dir / name).is_file()]
    if not found:
        return None
    try:
        data = yaml.safe_load((env_dir / found[0]).read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise InvalidComposeError(f"{found[0]}: not YAML: {e}") from None
    spec = parse_compose(data, env_dir, found[0])
    notes = [f"{found[0]}: Harbor 0.26 reads only {COMPOSE_FILE}; this file is read here"] \
        if found[0] != COMPOSE_FILE else []
    notes += [f"{found[1]} is ignored: {found[0]} is read"] if len(found) > 1 else []
    return dataclasses.replace(spec, warnings=spec.warnings + tuple(notes)) if notes else spec


def parse_compose(data: Any, env_dir: Path, file: str = COMPOSE_FILE) -> ComposeSpec:
    def bad(message: str) -> InvalidComposeError:
        return InvalidComposeError(f"{file}: {message}")

    if not isinstance(data, dict) or not isinstance(data.get("services"), dict):
        raise bad("expected a mapping with a 'services' mapping")
    refused_top = sorted(set(data) - {"services", "version", "name", "volumes", "networks"})
    if refused_top:
        raise bad(f"top-level {', '.join(refused_top)}: not supported (only services, volumes, networks)")
    volumes = _top_volumes(data.get("volumes"), bad)
    networks = _top_networks(data.get("networks"), bad)
    warnings: list[str] = []
    services: dict[str, Service] = {}
    main = {}
    for name, body in data["services"].items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise bad(f"service name {name!r}: use lower-case letters, digits, '_', '.', '-'")
        if not isinstance(body, dict):
            raise bad(f"services.{name}: expected a mapping")
        allowed = _MAIN_READ if name == MAIN else _READ
        for key in body:
            if key in _REFUSED:
                raise bad(f"services.{name}.{key} is refused in a sandbox ({_REFUSED[key]})")
            if key in _IGNORED:
                warnings.append(f"{COMPOSE_FILE}: services.{name}.{key} is ignored")
            elif key not in allowed:
                what = "main is the agent's container: only build, depends_on, environment and networks" \
                    if name == MAIN else "not supported"
                raise bad(f"services.{name}.{key}: {what}")
        _check_networks(body.get("networks"), name, networks, bad)
        if name == MAIN:
            main = body
            continue
        services[name] = _service(name, body, env_dir, bad, volumes)
    main_build = _build_folder(main.get("build"), MAIN, env_dir, bad) if "build" in main else None
    if networks:
        warnings.append(f"{file}: networks ({', '.join(networks)}) are one internal network of the trial's own here")
    main_deps = _depends_on(main.get("depends_on"), MAIN, bad)
    for who, deps in [*((s.name, s.depends_on) for s in services.values()), (MAIN, main_deps)]:
        for dep, condition in deps.items():
            if dep not in services:
                raise bad(f"services.{who}.depends_on: {dep!r} is not a service here")
            if condition == "service_healthy" and services[dep].healthcheck is None:
                raise bad(f"services.{who}.depends_on.{dep}: service_healthy needs a healthcheck on {dep}")
    return ComposeSpec(services=_start_order(services, bad), main_depends_on=main_deps,
                       main_environment=_environment(main.get("environment"), "main", bad),
                       warnings=tuple(warnings), main_build=main_build, volumes=tuple(volumes))


def _top_volumes(value: Any, bad) -> list[str]:
    """Named volumes: a name and at most an empty body (no driver, no host path, not external)."""
    if value is None:
        return []
    if not isinstance(value, dict):
        raise bad("volumes: expected a mapping of volume names")
    for name, body in value.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise bad(f"volumes.{name!r}: use lower-case letters, digits, '_', '.', '-'")
        if body not in (None, {}):
            raise bad(f"volumes.{name}: only a plain named volume is supported (no driver, options or external: "
                      "they can reach the host)")
    return list(value)


def _top_networks(value: Any, bad) -> list[str]:
    """Networks declared by name: accepted as the trial's one internal network."""
    if value is None:
        return []
    if not isinstance(value, dict):
        raise bad("networks: expected a mapping of network names")
    for name, body in value.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise bad(f"networks.{name!r}: use lower-case letters, digits, '_', '.', '-'")
        extra = sorted(set(body or {}) - {"internal"}) if isinstance(body, dict) or body is None else ["?"]
        driver = (body or {}).get("driver") if isinstance(body, dict) else None
        if extra and not (extra == ["driver"] and driver == "bridge"):
            raise bad(f"networks.{name}: {', '.join(extra)} is refused in a sandbox (the network is the sandbox's)")
    return list(value)


def _check_networks(value: Any, where: str, declared: list[str], bad) -> None:
    if value is None:
        return
    names = list(value) if isinstance(value, (list, dict)) else None
    if names is None or not all(isinstance(n, str) for n in names):
        raise bad(f"services.{where}.networks: expected a list of network names")
    if isinstance(value, dict) and any(v not in (None, {}) for v in value.values()):
        raise bad(f"services.{where}.networks: aliases and addresses are refused (the network is the sandbox's)")
    for n in names:
        if n not in declared and n != "default":
            raise bad(f"services.{where}.networks: {n!r} is not declared in the top-level networks")


def _service_volumes(value: Any, where: str, declared: list[str], bad) -> dict[str, str]:
    """``name:/path`` (or the long form with type volume) for each named volume; a path source
    is a host mount and refused."""
    if value is None:
        return {}
    if not isinstance(value, list):
        raise bad(f"services.{where}.volumes: expected a list")
    out: dict[str, str] = {}
    for item in value:
        if isinstance(item, str):
            parts = item.split(":")
            source, target = (parts[0], parts[1]) if len(parts) in (2, 3) else (None, item)
        elif isinstance(item, dict) and item.get("type", "volume") == "volume":
            source, target = item.get("source"), item.get("target")
        else:
            raise bad(f"services.{where}.volumes: {item!r}: only named volumes (no bind mounts: they reach the host)")
        if not isinstance(source, str) or source not in declared:
            raise bad(f"services.{where}.volumes: {item!r} is refused in a sandbox (mounts reach the host): only "
                      "named volumes of the top-level volumes")
        if not isinstance(target, str) or not target.startswith("/"):
            raise bad(f"services.{where}.volumes: {item!r}: the target must be an absolute container path")
        out[source] = target
    return out


def _build_folder(build: Any, name: str, env_dir: Path, bad) -> str:
    """A build folder below environment/ holding a Dockerfile, relative to environment/."""
    if isinstance(build, dict):
        extra = sorted(set(build) - {"context", "dockerfile"})
        if extra or build.get("dockerfile", "Dockerfile") != "Dockerfile":
            raise bad(f"services.{name}.build: only a context folder with a Dockerfile is supported")
        build = build.get("context", ".")
    if not isinstance(build, str):
        raise bad(f"services.{name}.build: expected a folder")
    context = (env_dir / build).resolve()
    if not context.is_relative_to(env_dir.resolve()) or not (context / "Dockerfile").is_file():
        raise bad(f"services.{name}.build: {build!r} is not a folder below environment/ with a Dockerfile")
    return context.relative_to(env_dir.resolve()).as_posix()


def _service(name: str, body: dict, env_dir: Path, bad, volumes: list[str]) -> Service:
    image, build = body.get("image"), body.get("build")
    if build is not None:
        build = _build_folder(build, name, env_dir, bad)
        image = None  # compose tags the build with `image`; the sandbox tags by content
    elif not isinstance(image, str) or not image:
        raise bad(f"services.{name}: needs an image or a build folder")
    healthcheck = body.get("healthcheck")
    return Service(
        name=name, image=image, build=build,
        command=_command(body.get("command"), f"{name}.command", bad),
        entrypoint=_command(body.get("entrypoint"), f"{name}.entrypoint", bad),
        environment=_environment(body.get("environment"), name, bad),
        working_dir=_str(body.get("working_dir"), f"{name}.working_dir", bad),
        user=_str(body.get("user"), f"{name}.user", bad),
        depends_on=_depends_on(body.get("depends_on"), name, bad),
        healthcheck=_healthcheck(healthcheck, name, bad) if healthcheck is not None else None,
        volumes=_service_volumes(body.get("volumes"), name, volumes, bad),
    )


def _str(value: Any, where: str, bad) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise bad(f"services.{where}: expected a string")


def _command(value: Any, where: str, bad) -> tuple[str, ...] | str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
        return tuple(str(v) for v in value)
    raise bad(f"services.{where}: expected a string or a list of strings")


def _environment(value: Any, where: str, bad) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, list):
        if not all(isinstance(v, str) for v in value):
            raise bad(f"services.{where}.environment: expected NAME=value strings")
        pairs = [v.split("=", 1) for v in value]
        value = {p[0]: p[1] if len(p) > 1 else "" for p in pairs}
    if not isinstance(value, dict):
        raise bad(f"services.{where}.environment: expected a mapping or a list of NAME=value")
    out = {}
    for k, v in value.items():
        if not isinstance(k, str) or not _ENV_NAME.match(k):
            raise bad(f"services.{where}.environment: {k!r} is not a variable name")
        if v is not None and not isinstance(v, _SCALAR):
            raise bad(f"services.{where}.environment.{k}: expected a string, number or boolean")
        out[k] = "" if v is None else str(v).lower() if isinstance(v, bool) else str(v)
    return out


def _depends_on(value: Any, where: str, bad) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return dict.fromkeys(value, "service_started")
    if isinstance(value, dict):
        out = {}
        for dep, cond in value.items():
            condition = (cond or {}).get("condition", "service_started") if isinstance(cond, dict) else None
            if condition not in ("service_started", "service_healthy"):
                raise bad(f"services.{where}.depends_on.{dep}: condition must be service_started or service_healthy")
            out[str(dep)] = condition
        return out
    raise bad(f"services.{where}.depends_on: expected a list or a mapping")


_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?(?:(\d+)ms)?$")


def _healthcheck(value: Any, where: str, bad) -> HealthCheck:
    if not isinstance(value, dict) or "test" not in value:
        raise bad(f"services.{where}.healthcheck: expected a mapping with a test")
    test = value["test"]
    if isinstance(test, str):
        test = ["CMD-SHELL", test]
    if not (isinstance(test, list) and len(test) >= 2 and test[0] in ("CMD", "CMD-SHELL")
            and all(isinstance(t, _SCALAR) for t in test)):
        raise bad(f"services.{where}.healthcheck.test: expected [CMD, ...] or [CMD-SHELL, command]")
    argv = tuple(map(str, test[1:])) if test[0] == "CMD" else ("sh", "-c", " ".join(map(str, test[1:])))
    interval = value.get("interval", "1s")
    if not isinstance(interval, _SCALAR):
        raise bad(f"services.{where}.healthcheck.interval: expected a duration like 1s or 500ms")
    m = _DURATION.match(str(interval))
    if not m or not any(m.groups()):
        raise bad(f"services.{where}.healthcheck.interval: {interval!r} is not a duration like 1s or 500ms")
    seconds = float(m.group(1) or 0) * 60 + float(m.group(2) or 0) + float(m.group(3) or 0) / 1000
    retries = value.get("retries", 30)
    if not isinstance(retries, int) or isinstance(retries, bool) or retries < 1:
        raise bad(f"services.{where}.healthcheck.retries: expected a positive integer")
    return HealthCheck(test=argv, interval=max(seconds, 0.1), retries=retries)


def _start_order(services: dict[str, Service], bad) -> tuple[Service, ...]:
    order: list[Service] = []
    state: dict[str, int] = {}  # 1: visiting, 2: placed

    def visit(name: str, path: tuple[str, ...]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            raise bad(f"depends_on cycle: {' -> '.join((*path, name))}")
        state[name] = 1
        for dep in services[name].depends_on:
            visit(dep, (*path, name))
        state[name] = 2
        order.append(services[name])

    for name in services:
        visit(name, ())
    return tuple(order)
