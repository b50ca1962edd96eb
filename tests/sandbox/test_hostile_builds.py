"""Hostile image builds and networked tasks: a RUN step cannot reach the host, a fork bomb or a
memory hog fails the build with its reason and leaves the host alone, and a task that says
``allow_internet = true`` cannot grant itself a network (the operator's egress network, where
allowed, still cannot reach the host)."""

from __future__ import annotations

import hashlib
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from aes_lib.bundle import Task
from aes_lib.bundle.config import EnvironmentConfig
from aes_lib.sandbox import images as images_mod
from aes_lib.sandbox.container import (LimitCaps, Limits, Sandbox, bridge_gateway, egress_network, interface_addresses,
                                       remove_egress_network)
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox.images import BuildFailedError, BuildTimeoutError, ImageCache, build_image

pytestmark = pytest.mark.docker


class Listener:
    """A TCP listener on every host address (random port) that records who connected."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("0.0.0.0", 0))
        self.port = self.sock.getsockname()[1]
        self.seen: list[tuple[str, int]] = []
        self.sock.settimeout(0.2)
        self._stop = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, addr = self.sock.accept()
            except OSError:
                continue
            self.seen.append(addr)
            conn.close()

    def close(self) -> None:
        self._stop = True
        self._thread.join()
        self.sock.close()


@pytest.fixture(params=["installed", "fresh"])
def engine(request, docker_client) -> Iterator[docker.DockerClient]:
    """The isolation checks run on the installed engine and on a freshly started one, whose
    state (no gateway in the default bridge's IPAM config, no cached layers) is what a new
    machine has: the installed engine's state may hide what a fresh one shows. Checks that need
    the engine's own firewall rules (container-to-container traffic, the egress network's NAT)
    stay on the installed engine: a second daemon on this host runs without iptables, since
    one that manages them removes the first engine's chains when it starts."""
    if request.param == "installed":
        yield docker_client
        return
    client = docker.DockerClient(base_url=request.getfixturevalue("fresh_engine"))
    yield client
    client.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    lst = Listener()
    yield lst
    lst.close()


def host_addresses(docker_client) -> list[str]:
    """The engine's default bridge gateway and every non-loopback IPv4 address of the host."""
    gw = bridge_gateway(docker_client.networks.get("bridge"))
    addrs = [str(a.ip) for a in interface_addresses() if not a.ip.is_loopback]
    return list(dict.fromkeys([gw, *addrs]))


def connect_script(addrs: list[str], port: int) -> str:
    """Python that tries every address; prints CONNECTED and exits 0 on the first that answers."""
    return ("import socket, sys\n"
            f"for a in {addrs!r}:\n"
            "    try:\n"
            f"        socket.create_connection((a, {port}), timeout=2).close()\n"
            "        print('CONN' + 'ECTED', a); sys.exit(0)\n"
            "    except OSError as e:\n"
            "        print(a, e)\n"
            "sys.exit(1)\n")


def run_python(code: str) -> str:
    """A one-line Dockerfile RUN step running ``code`` with python3 (as exec of a literal)."""
    literal = code.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
    return f"RUN python3 -c \"exec('{literal}')\""


def context(tmp_path: Path, *runs: str) -> Path:
    ctx = tmp_path / f"ctx-{uuid.uuid4().hex[:6]}"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM aes-base:latest\n" + "".join(r + "\n" for r in runs))
    return ctx


@pytest.fixture
def cgroups(monkeypatch) -> list:
    """Every build cgroup created during the test (to check that each is gone afterwards)."""
    made: list = []
    create = images_mod.BuildCgroup.create.__func__

    def spy(cls, client, pids):
        cg = create(cls, client, pids)
        made.append(cg)
        return cg

    monkeypatch.setattr(images_mod.BuildCgroup, "create", classmethod(spy))
    return made


def assert_gone(cgroups: list) -> None:
    for cg in cgroups:
        assert cg is not None, "builds here must get a cgroup parent (local engine, cgroupfs)"
        assert not cg.pids(), f"processes left in {cg.name}"
        assert not list(Path("/sys/fs/cgroup").glob(f"*/{cg.name}")), f"{cg.name} not removed"


async def test_a_run_step_cannot_reach_the_host(engine, listener, make_task, tmp_path, cgroups) -> None:
    addrs = host_addresses(engine)
    code = connect_script(addrs, listener.port)
    # Control: the same step on the default network (what a trusted recipe gets) does connect;
    # it exits 1 afterwards so that no image is left.
    with pytest.raises(BuildFailedError) as control:
        build_image(engine, context(tmp_path, run_python(code) + " && exit 1"), 60, trusted=True)
    assert "CONNECTED" in control.value.log and listener.seen
    listener.seen.clear()
    # A task's build, through the image cache, although its task.toml asks for the internet.
    task_dir = make_task({"environment/Dockerfile": "FROM aes-base:latest\n" + run_python(code) + "\n"})
    toml = task_dir / "task.toml"
    toml.write_text(toml.read_text().replace("allow_internet = false", "allow_internet = true"))
    task = Task.load(task_dir)
    assert task.config.environment.allow_internet
    with pytest.raises(BuildFailedError) as e:
        await ImageCache(engine, kinds=DomainKinds()).build(task)
    assert "network unreachable" in str(e.value), str(e.value)
    assert "CONNECTED" not in e.value.log and "Network is unreachable" in e.value.log
    time.sleep(0.5)
    assert listener.seen == []
    assert_gone(cgroups)


async def test_a_fork_bomb_fails_on_the_process_limit(docker_client, tmp_path, cgroups) -> None:
    bomb = "import os, time\nwhile True:\n    if os.fork() == 0:\n        time.sleep(300)\n"
    with pytest.raises(BuildFailedError) as e:
        build_image(docker_client, context(tmp_path, run_python(bomb)), 60, limits=Limits(pids=64))
    assert not isinstance(e.value, BuildTimeoutError)  # it failed on the pid limit, before its time limit
    assert "process limit reached (64 processes)" in str(e.value), str(e.value)
    assert_gone(cgroups)
    # None of the bomb's processes outlived the build (counted by what they run, not by how many
    # processes the host has: other tests run beside this one).
    left = subprocess.run(["pgrep", "-f", "os.fork"], capture_output=True, text=True).stdout.split()
    assert not left, f"fork bomb processes left: {left}"


async def test_a_shell_fork_bomb_is_bounded_and_stopped_at_the_time_limit(docker_client, tmp_path, cgroups) -> None:
    # The classic bomb, each copy waiting on its children: it runs until the time limit.
    with pytest.raises(BuildTimeoutError) as e:  # a build that outlived its limit would hang to the test's timeout
        build_image(docker_client, context(tmp_path, "RUN bash -c 'f(){ f | f & wait; }; f'"), 5,
                    limits=Limits(pids=64))
    assert "time limit of 5s" in str(e.value) and "process limit reached" in str(e.value), str(e.value)
    assert_gone(cgroups)


async def test_a_memory_hog_fails_out_of_memory(docker_client, tmp_path, cgroups) -> None:
    hog = "x = bytearray(600 << 20)\nprint('ALLOC' + 'ATED')\n"
    with pytest.raises(BuildFailedError) as e:
        build_image(docker_client, context(tmp_path, run_python(hog)), 60, limits=Limits(memory_mb=128))
    assert "out of memory" in str(e.value) and "128 MiB" in str(e.value), str(e.value)
    assert "returned a non-zero code: 137" in e.value.log and "ALLOCATED" not in e.value.log
    assert_gone(cgroups)


def test_a_task_cannot_grant_itself_the_network(monkeypatch) -> None:
    env = EnvironmentConfig(allow_internet=True)
    monkeypatch.delenv("AES_SANDBOX_NETWORK", raising=False)
    assert not Limits.for_task(env).network  # a generated task: default caps
    assert not Limits.for_task(env, LimitCaps(allow_network=True)).network  # the operator's default: none
    monkeypatch.setenv("AES_SANDBOX_NETWORK", "imported")
    assert not Limits.for_task(env).network  # still not a generated one
    assert Limits.for_task(env, LimitCaps(allow_network=True)).network  # an imported one
    assert not Limits.for_task(EnvironmentConfig(), LimitCaps(allow_network=True)).network


async def test_a_networked_task_sandbox_cannot_reach_the_host(engine, listener, test_label) -> None:
    addrs = host_addresses(engine)
    env = EnvironmentConfig(allow_internet=True)
    async with Sandbox.start("aes-base:latest", Limits.for_task(env), client=engine, labels=test_label) as sb:
        ifaces = await sb.exec("ls /sys/class/net", timeout=30)
        await sb.put_file(connect_script(addrs, listener.port).encode(), "/tmp/connect.py")
        r = await sb.exec("python3 /tmp/connect.py", timeout=60)
    assert ifaces.output.split() == ["lo"]
    assert r.exit_code == 1 and "CONNECTED" not in r.output
    time.sleep(0.5)
    assert listener.seen == []


async def test_the_operators_egress_network_cannot_reach_the_host(docker_client, listener, test_label,
                                                                 monkeypatch, tmp_path) -> None:
    name = f"aes-egress-test-{uuid.uuid4().hex[:6]}"
    monkeypatch.setenv("AES_SANDBOX_NETWORK", "imported")
    monkeypatch.setenv("AES_SANDBOX_EGRESS_NETWORK", name)
    limits = Limits.for_task(EnvironmentConfig(allow_internet=True), LimitCaps(allow_network=True))
    assert limits.network
    try:
        net = docker_client.networks.get(egress_network(docker_client))
        addrs = [*host_addresses(docker_client), bridge_gateway(net)]
        async with Sandbox.start("aes-base:latest", limits, client=docker_client, labels=test_label) as sb:
            ifaces = await sb.exec("ls /sys/class/net", timeout=30)
            await sb.put_file(connect_script(addrs, listener.port).encode(), "/tmp/connect.py")
            r = await sb.exec("python3 /tmp/connect.py", timeout=60)
            # Outward traffic that is not to a blocked range still leaves (the mirror here), by
            # name: the host's resolver sits in a blocked range and answers on port 53 alone.
            out = await sb.exec(reach("deb.debian.org", 80), timeout=30)
        assert "eth0" in ifaces.output.split()
        assert r.exit_code == 1 and "CONNECTED" not in r.output, r.output
        time.sleep(0.5)
        assert listener.seen == []
        assert "OUT" in out.output, out.output
        assert "No route to host" in r.output  # rejected at once, not left to time out
        # A build on that network (what such a task's build gets) cannot reach the host either.
        with pytest.raises(BuildFailedError) as e:
            build_image(docker_client, context(tmp_path, run_python(connect_script(addrs, listener.port))), 60,
                        limits=limits)
        assert "network unreachable" in str(e.value) and name in str(e.value), str(e.value)
        time.sleep(0.5)
        assert listener.seen == []
    finally:
        bridge = "aes" + hashlib.sha256(name.encode()).hexdigest()[:10]
        remove_egress_network(docker_client, name)
        rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True).stdout
        assert bridge not in rules


def reach(host: str, port: int) -> str:
    """A command that connects to ``host:port`` from the sandbox, printing OUT or the error."""
    return (f"python3 -c 'import socket\ntry: socket.create_connection((\"{host}\", {port}), timeout=5); print(\"OUT\")\n"
            "except OSError as e: print(\"ERR\", e)'")


async def test_an_allowlisted_task_reaches_its_hosts_and_nothing_else(docker_client, listener, test_label,
                                                                       monkeypatch) -> None:
    """``network_mode = "allowlist"``: the listed hosts by name (DNS answers), nothing unlisted
    (the same address, while another allow-list omits it), and never the host, even listed."""
    prefix = f"aes-allow-test-{uuid.uuid4().hex[:6]}"
    monkeypatch.setenv("AES_SANDBOX_NETWORK", "imported")
    monkeypatch.setenv("AES_SANDBOX_EGRESS_NETWORK", prefix)
    mirror = socket.gethostbyname("deb.debian.org")
    hosts = host_addresses(docker_client)
    listed = EnvironmentConfig(network_mode="allowlist", allowed_hosts=("deb.debian.org", "localhost", *hosts))
    other = EnvironmentConfig(network_mode="allowlist", allowed_hosts=("198.51.100.7",))  # TEST-NET-2: not the mirror
    caps = LimitCaps(allow_network=True)
    assert Limits.for_task(listed, caps).allowed_hosts == listed.allowed_hosts
    assert not Limits.for_task(listed).network  # a generated task gets no network, allow-list or not
    try:
        async with Sandbox.start("aes-base:latest", Limits.for_task(listed, caps), client=docker_client,
                                 labels=test_label) as sb:
            ok = await sb.exec(reach("deb.debian.org", 80), timeout=30)
            await sb.put_file(connect_script(hosts, listener.port).encode(), "/tmp/connect.py")
            to_host = await sb.exec("python3 /tmp/connect.py", timeout=60)
        async with Sandbox.start("aes-base:latest", Limits.for_task(other, caps), client=docker_client,
                                 labels=test_label) as sb:
            unlisted = await sb.exec(reach(mirror, 80), timeout=30)
            named = await sb.exec(reach("deb.debian.org", 80), timeout=30)
        assert "OUT" in ok.output, ok.output
        assert to_host.exit_code == 1 and "CONNECTED" not in to_host.output, to_host.output
        time.sleep(0.5)
        assert listener.seen == []
        assert "No route to host" in unlisted.output, unlisted.output  # rejected at once by the allow-list
        assert "No route to host" in named.output, named.output  # resolves, and is still refused
    finally:
        made = [n.name for n in docker_client.networks.list(names=[prefix]) if n.name.startswith(f"{prefix}-allow-")]
        for name in made:
            remove_egress_network(docker_client, name)
        rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True).stdout
        assert not [n for n in made if "aes" + hashlib.sha256(n.encode()).hexdigest()[:10] in rules], rules
    assert len(made) == 2  # one network per allow-list


def test_the_bridge_gateway_is_found_on_any_engine_state(docker_client, fresh_engine) -> None:
    """On a freshly started engine the default bridge's IPAM config may name no gateway (20.10
    does not): the host's address is then the bridge interface's own."""
    for client in (docker_client, docker.DockerClient(base_url=fresh_engine)):
        net = client.networks.get("bridge")
        bridge = net.attrs["Options"]["com.docker.network.bridge.name"]
        assert bridge_gateway(net) == str(interface_addresses(bridge)[0].ip)
