"""A limited, labelled container to run untrusted commands in.

Every blocking Docker SDK call runs in a worker thread so the event loop stays
free. A timed-out command is killed with its whole process tree, and the container
is removed however the ``async with`` block ends.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import io
import ipaddress
import os
import re
import shlex
import socket
import struct
import subprocess
import tarfile
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO

import docker
import docker.errors
import docker.types

from aes_lib.bundle import EnvironmentConfig
from aes_lib.config import Settings
from aes_lib.sandbox.engine import is_podman

MANAGED_LABEL = "aes.managed"
OWNER_PID_LABEL = "aes.owner_pid"
OWNER_HOST_LABEL = "aes.owner_host"

EXEC_MARK = "AES_EXEC_ID"
"""Environment variable, unique per exec, that every process the exec starts inherits."""

# Runs the command with bash (sh if the image has none). The daemon starts each exec as a
# session leader and ``exec`` keeps its pid, so the command leads the exec's session.
_WRAPPER = 'if command -v bash >/dev/null 2>&1; then exec bash -c "$1"; else exec sh -c "$1"; fi'

# Kills a process tree: with ``$1`` = "AES_EXEC_ID=<id>", every process whose environment
# carries it (that catches setsid escapes) and every process in a session one of them leads
# (that catches ``env -i``); with ``$1`` empty, every process but init and the keep-alive
# (started right after init, so the lowest pid above 1). Only builtins, as a fork bomb at
# the pid limit leaves no room to fork (an exec itself still starts); passes repeat
# SIGSTOP until no running process is found, so nothing forks while SIGKILL goes round.
_SWEEP = r"""
m=$1 me=$$ keep=$$ leaders=' '
for d in /proc/[0-9]*; do p=${d#/proc/}; [ "$p" -gt 1 ] && [ "$p" -lt "$keep" ] && keep=$p; done
hit() {
  if [ -z "$m" ]; then [ "$1" != "$keep" ]; return; fi
  case $leaders in *" $2 "*) return 0;; esac
  while IFS= read -r l || [ -n "$l" ]; do
    case $l in *"$m"*) [ "$1" = "$2" ] && leaders="$leaders$1 "; return 0;; esac
  done 2>/dev/null <"/proc/$1/environ"
  return 1
}
sweep() {
  new=0 found=0
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [ "$p" -gt 1 ] && [ "$p" != "$me" ] && read -r s 2>/dev/null <"$d/stat" || continue
    set -- ${s##*) }
    [ "$1" != Z ] && hit "$p" "$4" || continue
    [ "$1" = T ] || new=1
    found=1
    kill -"$sig" "$p" 2>/dev/null
  done
}
# Rounds until a KILL pass finds nothing: on a loaded machine a fork bomb can outrun 50 STOP
# passes, and a child forked while SIGKILL goes round would outlive a single round.
r=0
while [ $r -lt 20 ]; do
  sig=STOP n=0
  while [ $n -lt 50 ]; do sweep; [ $new = 1 ] || break; n=$((n + 1)); done
  sig=KILL; sweep
  [ $found = 1 ] || break
  r=$((r + 1))
done
true
"""
KILL_ALL = _SWEEP
"""Shell code that, at the start of a root script given no arguments, does ``kill_all`` but
spares the script's own shell (saves an exec)."""
SWEEP_TRIES = 5
"""Times a sweep's exec is tried: at the pid limit its own shell may find no pid to start in."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """Resources of one container."""

    cpus: float = 1.0
    """CPU quota (cores)."""
    memory_mb: int = 1024
    """Memory limit in MiB, swap included (exceeding it gets the process OOM-killed)."""
    pids: int = 256
    """Most processes and threads at once (fork bombs stop here)."""
    network: bool = False
    """Whether the container has a network at all: the egress-only network
    (:func:`egress_network`), never Docker's default bridge."""
    allowed_hosts: tuple[str, ...] | None = None
    """Under ``network``, only these hosts (names, IPv4 addresses or CIDRs), on a network of
    their own (:func:`allowlist_network`); None: the whole egress network."""
    gpus: int = 0
    """GPUs given to the container (an NVIDIA runtime must exist: see ``images.gpu_engine``)."""
    runtime: str | None = None
    """The engine's OCI runtime for it; None: ``AES_SANDBOX_RUNTIME``, read as the container
    starts (so every sandbox gets it); empty: the engine's default."""

    @classmethod
    def for_task(cls, env: EnvironmentConfig, caps: "LimitCaps | None" = None) -> "Limits":
        """The task's requests, defaults where absent, clamped to ``caps``. The network only
        where the task asks, the caller runs an operator-imported task (``caps.allow_network``)
        and the operator allows it (``AES_SANDBOX_NETWORK=imported``)."""
        caps = caps or LimitCaps()
        allowlist = env.network_mode == "allowlist"
        wants = (env.allow_internet or allowlist) and caps.allow_network
        return cls(
            cpus=min(env.cpus or caps.default_cpus, caps.max_cpus),
            memory_mb=min(env.memory_mb or caps.default_memory_mb, caps.max_memory_mb),
            pids=caps.pids,
            network=wants and Settings.from_env().sandbox_network == "imported",
            allowed_hosts=tuple(env.allowed_hosts or ()) if allowlist else None,
            gpus=env.gpus or 0,
        )

    def run_args(self) -> dict:
        """``containers.run`` arguments for the CPU, memory (swap included) and pid limits, no
        new privileges and the runtime; GPUs are the caller's to request."""
        runtime = Settings.from_env().sandbox_runtime if self.runtime is None else self.runtime
        return {"nano_cpus": int(self.cpus * 1e9), "mem_limit": f"{self.memory_mb}m",
                "memswap_limit": f"{self.memory_mb}m", "pids_limit": self.pids,
                "security_opt": ["no-new-privileges"], **({"runtime": runtime} if runtime else {})}


    def missing_in(self, host_config: Mapping) -> str:
        """The limits the engine's record of a container lacks ("" when all are there): an engine
        that drops them (rootless Podman on cgroup v1 only logs it) would run a fork bomb unbounded."""
        want = {"PidsLimit": self.pids, "Memory": self.memory_mb << 20, "NanoCpus": int(self.cpus * 1e9)}
        return ", ".join(f"{k} {host_config.get(k)!r} instead of {v}" for k, v in want.items()
                         if host_config.get(k) != v)


@dataclasses.dataclass(frozen=True)
class LimitCaps:
    """What any task may get, whatever its task.toml asks."""

    default_cpus: float = 1.0
    """CPUs for a task that asks for none."""
    max_cpus: float = 2.0
    """Most CPUs a task gets."""
    default_memory_mb: int = 1024
    """Memory for a task that asks for none."""
    max_memory_mb: int = 4096
    """Most memory a task gets."""
    pids: int = 512
    """Process limit of every container."""
    allow_network: bool = False
    """Whether ``allow_internet = true`` is honoured at all: only for tasks the operator imported
    (``aes pool seed --from``), never for generated ones, and then only under
    ``AES_SANDBOX_NETWORK=imported``."""


BLOCKED_RANGES = ("0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
                  "192.168.0.0/16", "224.0.0.0/4", "240.0.0.0/4")
"""Destinations the egress network drops besides the host's own subnets: private, shared,
link-local (cloud metadata), loopback, multicast and reserved addresses (where the stack's
services and the rest of the operator's network live)."""
EGRESS_LABEL = "aes.egress"
_egress_lock = threading.Lock()


def local_engine(client: docker.DockerClient) -> bool:
    """Whether the engine is reached through a unix socket on this host (so this host's
    firewall and cgroups are the ones its containers live in)."""
    return client.api.base_url == "http+docker://localhost"


def egress_network(client: docker.DockerClient, name: str | None = None) -> str:
    """The name of the egress-only network (``AES_SANDBOX_EGRESS_NETWORK``), created with its
    firewall rules when missing: its containers reach the outside world and the host's DNS
    resolvers (port 53 only) but not the host (any of its addresses), each other, or private
    ranges (``BLOCKED_RANGES`` and the host's own subnets) except ``AES_SANDBOX_EGRESS_ALLOW``.
    ``SandboxError`` where that cannot be ensured (a remote engine, no iptables): a networked
    sandbox is refused, never given Docker's plain bridge."""
    settings = Settings.from_env()
    return _filtered_network(client, name or settings.sandbox_egress_network, settings.sandbox_egress_allow,
                             only_allowed=False)


def allowlist_network(client: docker.DockerClient, hosts: tuple[str, ...]) -> str:
    """The name of a network whose containers reach only ``hosts`` (Harbor's ``allowed_hosts``:
    names, IPv4 addresses or CIDRs) and the DNS resolvers, one per set of hosts, created like
    :func:`egress_network`. Names are resolved to their IPv4 addresses now, and again at every
    call (each new sandbox): an address a name gains later is added then, and one it loses
    stays allowed. Harbor filters by name at a proxy instead (TLS SNI, HTTP Host); by address,
    a listed host's address also reaches other names it serves (a CDN's), never another address.
    An address in a blocked range or of the host stays unreachable even when listed."""
    digest = hashlib.sha256("\n".join(sorted(hosts)).encode()).hexdigest()[:10]
    name = f"{Settings.from_env().sandbox_egress_network}-allow-{digest}"
    return _filtered_network(client, name, allowed_addresses(hosts), only_allowed=True)


def network_for(client: docker.DockerClient, limits: Limits) -> str:
    """The network a sandbox with ``limits.network`` joins: the allow-list network of its
    ``allowed_hosts``, else the egress network. (Builds keep the egress network, as Harbor
    builds with the public one: the allow-list is the agent's.)"""
    if limits.allowed_hosts is not None:
        return allowlist_network(client, limits.allowed_hosts)
    return egress_network(client)


def allowed_addresses(hosts: tuple[str, ...]) -> tuple[str, ...]:
    """The IPv4 networks ``hosts`` name (a name's current addresses), without any that
    overlaps a blocked range or the host's subnets: listing one never opens the host or the
    stack. A name that does not resolve adds nothing."""
    found: set[ipaddress.IPv4Network] = set()
    for host in hosts:
        try:
            found.add(ipaddress.IPv4Network(host))
            continue
        except ValueError:
            pass
        try:
            infos = socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)
        except socket.gaierror:
            continue
        found |= {ipaddress.IPv4Network(info[4][0]) for info in infos}
    blocked = [ipaddress.IPv4Network(n) for n in (*BLOCKED_RANGES, *_host_subnets())]
    return tuple(sorted(str(n) for n in found if not any(n.overlaps(b) for b in blocked)))


def _filtered_network(client: docker.DockerClient, name: str, allow: tuple[str, ...], *, only_allowed: bool) -> str:
    if not local_engine(client):
        raise SandboxError(f"the egress network {name} needs the firewall of the engine's host: "
                           f"not available for the engine at {client.api.base_url}")
    if is_podman(client):  # its bridges' traffic never passes DOCKER-USER: the rules would not apply
        raise SandboxError(f"the egress network {name} is enforced in Docker's DOCKER-USER chain, which Podman's "
                           "networks bypass: a networked sandbox is refused on Podman")
    with _egress_lock:
        try:
            net = client.networks.get(name)
        except docker.errors.NotFound:
            bridge = "aes" + hashlib.sha256(name.encode()).hexdigest()[:10]
            try:
                net = client.networks.create(
                    name, driver="bridge", check_duplicate=True, labels={EGRESS_LABEL: "1"},
                    options={"com.docker.network.bridge.name": bridge,
                             "com.docker.network.bridge.enable_icc": "false"})
            except docker.errors.APIError:  # another process created it meanwhile
                net = client.networks.get(name)
        try:
            _firewall(_bridge(net), allow, only_allowed)
        except (OSError, subprocess.CalledProcessError) as e:
            raise SandboxError(f"cannot install the firewall rules of network {name}: {e}") from e
    return name


def remove_egress_network(client: docker.DockerClient, name: str) -> None:
    """Remove network ``name`` and the firewall rules ``egress_network`` added for it."""
    try:
        net = client.networks.get(name)
    except docker.errors.NotFound:
        return
    bridge = _bridge(net)
    net.remove()
    for chain, rule in _our_rules(bridge):
        subprocess.run(["iptables", "-w", "-D", chain, *rule], check=False, capture_output=True)


def _bridge(net) -> str:
    return (net.attrs.get("Options") or {}).get("com.docker.network.bridge.name") or f"br-{net.id[:12]}"


def interface_addresses(dev: str | None = None) -> list[ipaddress.IPv4Interface]:
    """The IPv4 addresses (with prefix) of this host's interfaces, or of interface ``dev`` alone."""
    cmd = ["ip", "-4", "-o", "addr", "show", *(["dev", dev] if dev else [])]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [ipaddress.IPv4Interface(m) for m in re.findall(r"\binet\s+(\S+)", out)]


def bridge_gateway(net) -> str:
    """The host's address on the local bridge network ``net``, on any engine state: an engine
    that has just started leaves ``Gateway`` out of the default bridge's IPAM config (seen on
    20.10), so where it is missing the address is read off the bridge interface itself."""
    for cfg in (net.attrs.get("IPAM") or {}).get("Config") or []:
        if cfg.get("Gateway"):
            return cfg["Gateway"].split("/")[0]
    bridge = _bridge(net)
    try:
        addrs = interface_addresses(bridge)
    except subprocess.CalledProcessError as e:
        raise SandboxError(f"network {net.name}: no gateway in its IPAM config and no interface {bridge}: "
                           f"{e.stderr.strip()}") from e
    if not addrs:
        raise SandboxError(f"network {net.name}: no gateway in its IPAM config and no IPv4 address on {bridge}")
    return str(addrs[0].ip)


def _host_subnets() -> list[str]:
    return sorted({str(a.network) for a in interface_addresses()})


def dns_resolvers() -> tuple[str, ...]:
    """The IPv4 name servers Docker's embedded DNS forwards a container's queries to: the
    host's, from the container's own network (so through the firewall). Where the host's are
    a local stub's (127.0.0.53: systemd-resolved), Docker reads the upstream ones instead."""
    for conf in (Path("/etc/resolv.conf"), Path("/run/systemd/resolve/resolv.conf")):
        try:
            text = conf.read_text()
        except OSError:
            continue
        found = [ipaddress.IPv4Address(m) for m in re.findall(r"(?m)^\s*nameserver\s+(\d+\.\d+\.\d+\.\d+)\s*$", text)]
        if remote := [str(a) for a in found if not a.is_loopback]:
            return tuple(remote)
    return ()


def _our_rules(bridge: str) -> list[tuple[str, list[str]]]:
    """(chain, rule spec) of each rule in INPUT and DOCKER-USER carrying ``bridge``'s comment."""
    tag = f"aes-egress:{bridge}"
    found = []
    for chain in ("INPUT", "DOCKER-USER"):
        out = subprocess.run(["iptables", "-w", "-S", chain], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if tag in line and line.startswith(f"-A {chain} "):
                found.append((chain, shlex.split(line)[2:]))
    return found


def _firewall(bridge: str, allow: tuple[str, ...], only_allowed: bool) -> None:
    """Rules, scoped to traffic entering from ``bridge``: nothing to the host itself (INPUT),
    nothing forwarded to blocked ranges (DOCKER-USER) except DNS to the host's resolvers and
    traffic to ``allow`` (those RETURN to Docker's own chains), and under ``only_allowed``
    nothing else forwarded either."""
    tag = ["-m", "comment", "--comment", f"aes-egress:{bridge}"]
    # Rejected, not dropped: a blocked connection fails at once ("No route to host").
    reject = ["-j", "REJECT", "--reject-with", "icmp-admin-prohibited"]
    drops = [("INPUT", ["-i", bridge, *tag, *reject])]
    drops += [("DOCKER-USER", ["-i", bridge, "-d", net, *tag, *reject]) for net in (*BLOCKED_RANGES, *_host_subnets())]
    if only_allowed:
        drops.append(("DOCKER-USER", ["-i", bridge, *tag, *reject]))
    accepts = [("DOCKER-USER", ["-i", bridge, "-d", a, *tag, "-j", "RETURN"]) for a in allow]
    accepts += [("DOCKER-USER", ["-i", bridge, "-d", r, "-p", proto, "--dport", "53", *tag, "-j", "RETURN"])
                for r in dns_resolvers() for proto in ("udp", "tcp")]

    def present(chain: str, rule: list[str]) -> bool:
        return subprocess.run(["iptables", "-w", "-C", chain, *rule], capture_output=True).returncode == 0

    missing = [r for r in drops + accepts if not present(*r)]
    if not missing:
        return
    for chain, rule in drops:
        if not present(chain, rule):
            subprocess.run(["iptables", "-w", "-I", chain, "1", *rule], check=True, capture_output=True)
    # The exceptions go above every drop: delete and insert them again at the top.
    for chain, rule in _our_rules(bridge):
        if rule[-1] == "RETURN":
            subprocess.run(["iptables", "-w", "-D", chain, *rule], check=True, capture_output=True)
    for chain, rule in accepts:
        subprocess.run(["iptables", "-w", "-I", chain, "1", *rule], check=True, capture_output=True)


@dataclasses.dataclass(frozen=True)
class ExecResult:
    exit_code: int | None
    """The command's exit status; None when it was killed on timeout."""
    output: str
    """stdout and stderr interleaved, truncated in the middle past ``max_output`` bytes."""
    timed_out: bool = False


class SandboxError(RuntimeError):
    """The container could not be started or talked to (or stopped under a command)."""


class SandboxVerdict(SandboxError):
    """A sandbox failure the attempt or the task caused (the agent stopped its container, its
    changes cannot be read, the task's services did not start): the trial scores 0. Any other
    ``SandboxError`` in a trial is the infrastructure's and never a reward."""


class DaemonError(SandboxError):
    """The engine refused or failed a request: the container died under it, or the engine
    itself failed (e.g. a runtime timeout under load), which only the container's state tells apart."""


async def _call(fn, *args, **kwargs):
    """``fn`` in a worker thread; a daemon error (e.g. the container died) becomes DaemonError."""
    try:
        return await asyncio.to_thread(fn, *args, **kwargs)
    except docker.errors.APIError as e:
        raise DaemonError(str(e)) from e


_STDOUT, _STDERR = 1, 2


def _exec_frames(api: docker.APIClient, exec_id: str, idle_s: float) -> Iterator[tuple[int, bytes]]:
    """Start a created exec and yield its output as (stream, bytes) frames, in order; a read
    waits up to ``idle_s`` (the client's own timeout, 60 s by default, made a command that
    printed nothing for a minute an error even when its own timeout was longer).

    Not docker-py's ``exec_start(stream=True)``: that reads the upgraded connection's raw
    socket, behind the buffered reader that parsed the HTTP headers, so output that arrived
    in the same read as the headers is skipped. Under load that drops whole frames silently
    or puts the frame headers out of step ("117 is not a valid stream"). This reads every
    frame through that buffered reader.
    """
    res = api._post_json(api._url("/exec/{0}/start", exec_id), data={"Tty": False, "Detach": False},
                         headers={"Connection": "Upgrade", "Upgrade": "tcp"}, stream=True)
    try:
        api._raise_for_status(res)
        sock = api._get_raw_response_socket(res)
        for s in (sock, getattr(sock, "_sock", None)):  # a SocketIO wraps the socket itself
            if hasattr(s, "settimeout"):
                s.settimeout(idle_s)
        fp = res.raw._fp.fp  # http.client's buffered reader over the connection's socket
        while len(head := fp.read(8)) == 8:
            stream, size = struct.unpack(">BxxxL", head)
            if stream not in (_STDOUT, _STDERR):
                raise SandboxError(f"exec output out of step: frame header {head!r}")
            data = fp.read(size)
            if data:
                yield stream, data
            if len(data) < size:
                return  # the connection ended mid-frame
    finally:
        res.close()


def _copy_limited(stream, dest: IO[bytes], max_bytes: int, what: str) -> None:
    """Write a get_archive stream to ``dest``, refusing (before writing it) more than ``max_bytes``:
    what the container holds is too large, the attempt's doing (a verdict), not the engine's."""
    size = 0
    for chunk in stream:
        size += len(chunk)
        if size > max_bytes:
            raise SandboxVerdict(f"{what}: more than {max_bytes} bytes")
        dest.write(chunk)


def join_network(client: docker.DockerClient, network: str | None, alias: str | None,
                 fallback: str | None) -> dict:
    """``containers.run`` arguments that put a container on ``network`` as ``alias``, else on
    ``fallback`` (the egress network), else on none."""
    if network is None:
        return {"network_mode": fallback or "none"}
    endpoint = client.api.create_endpoint_config(aliases=[alias] if alias else None)
    return {"network": network, "networking_config": {network: endpoint}}


def dir_entry(name: str, mode: int = 0o755) -> tarfile.TarInfo:
    """A root-owned directory's tar header."""
    info = tarfile.TarInfo(name)
    info.type, info.mode = tarfile.DIRTYPE, mode
    return info


def add_dir(tar: tarfile.TarFile, local: Path, prefix: str, mode: int = 0o755) -> None:
    """Add directory ``prefix`` (root-owned, ``mode``) holding the contents of ``local``."""
    tar.addfile(dir_entry(prefix, mode))
    for path in sorted(local.rglob("*")):
        tar.add(path, arcname=f"{prefix}/{path.relative_to(local)}", recursive=False)


SERVICES_NETWORK_LABEL = "aes.services"
"""Marks a trial's network and named volumes of compose services (``aes_lib.sandbox.services``);
the reaper removes those of dead owners."""


def owner_labels() -> dict[str, str]:
    """Labels that let the reaper find containers, and throw-away images, whose creating process
    has died. Images meant to outlive their builder (``ImageCache``) must not carry them."""
    return {MANAGED_LABEL: "1", OWNER_PID_LABEL: str(os.getpid()), OWNER_HOST_LABEL: socket.gethostname()}


class _Output:
    """Keeps the first and last ``limit/2`` bytes of a stream."""

    def __init__(self, limit: int) -> None:
        self.limit, self.head, self.tail, self.dropped = limit, bytearray(), bytearray(), 0

    def add(self, chunk: bytes) -> None:
        room = self.limit // 2 - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        excess = len(self.tail) - self.limit // 2
        if excess > 0:
            del self.tail[:excess]
            self.dropped += excess

    def text(self) -> str:
        mid = f"\n[... {self.dropped} bytes omitted ...]\n".encode() if self.dropped else b""
        return bytes(self.head + mid + self.tail).decode("utf-8", errors="replace")


class Sandbox:
    """One running container; create with ``async with Sandbox.start(...) as sb``."""

    def __init__(self, client: docker.DockerClient, container, workdir: str | None, max_output: int,
                 archive_owners: bool = True) -> None:
        self.client, self.container, self.workdir, self.max_output = client, container, workdir, max_output
        self.archive_owners = archive_owners
        """Whether the engine's archives carry owners as numbers (Docker's do; Podman's read uid 0
        for every file and keep only the container's names for them)."""

    @property
    def id(self) -> str:
        return self.container.id

    @classmethod
    @asynccontextmanager
    async def start(
        cls,
        image: str,
        limits: Limits = Limits(),
        *,
        client: docker.DockerClient | None = None,
        labels: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        workdir: str | None = None,
        max_output: int = 1 << 20,
        network: str | None = None,
        alias: str | None = None,
    ) -> AsyncIterator["Sandbox"]:
        """``network``: an internal network of the task's services (``aes_lib.sandbox.services``)
        to join, as ``alias`` there; the egress network is added only under ``limits.network``."""
        client = client or docker.from_env()
        all_labels = {**owner_labels(), **(labels or {})}
        try:
            egress = await asyncio.to_thread(network_for, client, limits) if limits.network else None
            container = await asyncio.to_thread(
                client.containers.run,
                image,
                entrypoint=["sleep", "infinity"],
                command=[],
                detach=True,
                init=True,
                name=f"aes-{uuid.uuid4().hex[:12]}",
                labels=all_labels,
                **join_network(client, network, alias, egress),
                **limits.run_args(),
                environment=dict(env or {}),
                working_dir=workdir,
                device_requests=[docker.types.DeviceRequest(count=limits.gpus, capabilities=[["gpu"]])]
                if limits.gpus else None,
            )
        except docker.errors.DockerException as e:
            raise SandboxError(f"cannot start a container from {image}: {e}") from e
        sb = cls(client, container, workdir, max_output, archive_owners=not await asyncio.to_thread(is_podman, client))
        if missing := limits.missing_in(container.attrs.get("HostConfig") or {}):
            await sb.close()
            raise SandboxError(f"the engine did not apply the limits of a container of {image} ({missing}): rootless "
                               "Podman on cgroup v1 ignores them; a sandbox without its limits is refused")
        try:
            if network and egress:
                try:
                    await asyncio.to_thread(client.networks.get(egress).connect, container)
                except docker.errors.DockerException as e:
                    raise SandboxError(f"cannot connect a container of {image} to {egress}: {e}") from e
            yield sb
        finally:
            await sb.close()

    async def close(self) -> None:
        try:
            await asyncio.to_thread(self.container.remove, force=True)
        except docker.errors.NotFound:
            pass

    async def exec(
        self,
        cmd: str,
        timeout: float,
        *,
        user: str | int | None = None,
        env: Mapping[str, str] | None = None,
        workdir: str | None = None,
        stdout: Callable[[bytes], object] | None = None,
    ) -> ExecResult:
        """Run ``cmd`` with bash (or sh); on timeout kill every process it started.

        Processes it leaves running when it ends in time are kept (a server for later steps).
        With ``stdout``, each piece of the command's standard output, whole and unchanged, is
        passed to it (an exception it raises ends the exec), and the result keeps only the
        standard error.
        """
        api = self.client.api
        user = "" if user is None else str(user)
        exec_mark = uuid.uuid4().hex
        created = await _call(
            api.exec_create,
            self.container.id,
            ["sh", "-c", _WRAPPER, "sh", cmd],
            user=user,
            environment={**(env or {}), EXEC_MARK: exec_mark},
            workdir=workdir or self.workdir,
        )
        exec_id = created["Id"]
        out = _Output(self.max_output)

        def pump() -> None:
            # The exec's own timeout kills it (below), which ends the stream; the margin only
            # bounds a read from an engine that stopped answering.
            for stream, data in _exec_frames(api, exec_id, timeout + 120):
                if stream == _STDOUT and stdout is not None:
                    stdout(data)
                else:
                    out.add(data)

        task = asyncio.ensure_future(_call(pump))  # a container that died under it: SandboxError
        timed_out = False
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout)
        except asyncio.TimeoutError:
            timed_out = True
            await self._kill_tree(task, f"{EXEC_MARK}={exec_mark}", user)
        await task  # re-raises what the pump raised
        info = await _call(api.exec_inspect, exec_id)
        return ExecResult(exit_code=None if timed_out else info.get("ExitCode"), output=out.text(), timed_out=timed_out)

    async def _kill_tree(self, pump: asyncio.Future, mark: str, user: str) -> None:
        # As the exec's own user: reading another user's /proc/<pid>/environ needs
        # CAP_SYS_PTRACE, which containers lack. The output ends at most ~2 s after the
        # processes die (the daemon's grace for stragglers holding it); sweeping again
        # covers a command that had not started yet at the first sweep.
        for _ in range(3):
            await self._sweep(mark, user)
            done, _ = await asyncio.wait({pump}, timeout=5)
            if done:
                return
        raise SandboxError("a timed-out command's output did not end after its processes were killed")

    async def _sweep(self, mark: str, user: str) -> None:
        for _ in range(SWEEP_TRIES):
            r = await _call(self.container.exec_run, ["sh", "-c", _SWEEP, "sh", mark], user=user)
            if r.exit_code == 0:
                return
            await asyncio.sleep(0.2)
        raise SandboxError(f"could not sweep the container's processes: {r.output[-300:]!r}")

    async def stop(self) -> None:
        """Kill every process in the container through the engine (no process of ours runs in
        it); its filesystem stays readable (``get_archive``) until ``close``."""
        try:
            await _call(self.container.kill)
        except DaemonError:
            if await self.running():  # not running already (the agent's init exited): nothing to kill
                raise

    async def kill_all(self) -> None:
        """Kill every process an agent left running: all but init and the keep-alive."""
        await self._sweep("", "0")

    async def inspect(self) -> dict:
        """The container's current ``docker inspect`` record."""
        await _call(self.container.reload)
        return self.container.attrs

    async def running(self) -> bool:
        """Whether the container is still up (a paused one is: only the engine's operator pauses)."""
        try:
            await asyncio.to_thread(self.container.reload)
        except docker.errors.NotFound:
            return False
        except docker.errors.APIError as e:
            raise DaemonError(str(e)) from e
        return bool(self.container.attrs["State"]["Running"])

    async def put_dir(self, local: str | Path, remote: str) -> None:
        """Copy the contents of directory ``local`` into ``remote``, which becomes a root-owned
        0755 directory (missing parents are created by the daemon)."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            add_dir(tar, Path(local), remote.strip("/"))
        await _call(self.container.put_archive, "/", buf.getvalue())

    async def put_archive(self, archive: IO[bytes]) -> None:
        """Extract tar ``archive`` (read from where it stands) at /."""
        await _call(self.container.put_archive, "/", archive)

    async def put_file(self, data: bytes, remote: str, mode: int = 0o644) -> None:
        """Write ``data`` to the file ``remote`` (missing parents are created)."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(remote.strip("/"))
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
        await _call(self.container.put_archive, "/", buf.getvalue())

    async def _archive(self, remote: str) -> tuple[Iterator[bytes], dict] | None:
        """Docker's tar stream of ``remote`` and its stat; None if absent. Any other refusal is
        the engine's (DaemonError), never an absent file."""
        try:
            return await asyncio.to_thread(self.container.get_archive, remote)
        except docker.errors.NotFound:
            return None
        except docker.errors.APIError as e:
            raise DaemonError(str(e)) from e

    async def get_archive(self, remote: str, dest: IO[bytes], max_bytes: int) -> bool:
        """Write Docker's tar of ``remote`` to ``dest`` (at most ``max_bytes``); False if absent."""
        if (found := await self._archive(remote)) is None:
            return False
        await asyncio.to_thread(_copy_limited, found[0], dest, max_bytes, remote)
        return True

    async def get_files(self, remote_dir: str, max_bytes: int = 16 << 20) -> dict[str, bytes]:
        """Every regular file under ``remote_dir`` (relative path -> bytes) in one copy; {} if absent."""
        buf = io.BytesIO()
        if not await self.get_archive(remote_dir.rstrip("/") + "/.", buf, max_bytes):
            return {}
        buf.seek(0)
        out = {}
        with tarfile.open(fileobj=buf) as tar:
            for m in tar:
                f = tar.extractfile(m) if m.isreg() else None
                if f is not None:
                    out[m.name.removeprefix("./")] = f.read()
        return out

    async def get_file(self, remote: str, max_bytes: int = 16 << 20) -> bytes | None:
        """The contents of regular file ``remote``, or None if it does not exist."""
        if (found := await self._archive(remote)) is None:
            return None
        stream, st = found
        if st["size"] > max_bytes:
            raise SandboxError(f"{remote}: {st['size']} bytes > {max_bytes}")
        data = b"".join(await asyncio.to_thread(list, stream))
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            member = tar.next()
            if member is None or not member.isreg():
                return None
            f = tar.extractfile(member)
            return f.read() if f else None

    async def get_dir(self, remote: str, local: str | Path, max_bytes: int = 256 << 20) -> bool:
        """Copy directory ``remote`` into ``local`` (links and special files skipped); False if absent."""
        buf = io.BytesIO()
        if not await self.get_archive(remote.rstrip("/") + "/.", buf, max_bytes):
            return False
        buf.seek(0)
        Path(local).mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=buf) as tar:
            tar.extractall(local, members=[m for m in tar if m.isreg() or m.isdir()], filter="data")
        return True
