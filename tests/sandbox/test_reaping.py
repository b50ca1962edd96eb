"""Leftovers of dead processes and of timed-out commands, on the real Docker engine: images of dead
owners, a build killed mid-way, process trees of timed-out execs, a fork bomb under kill_all."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import docker.errors
import pytest

from aes_lib.bundle import Task
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import ImageCache, Limits, Sandbox, reap
from aes_lib.sandbox.container import (MANAGED_LABEL, OWNER_HOST_LABEL, OWNER_PID_LABEL, SERVICES_NETWORK_LABEL,
                                      owner_labels)
from foundation.helpers import eventually

# One worker runs these: a reap with a 1 s grace takes any ownerless dangling image, such as the
# ownerless image another test here is about to reap itself.
pytestmark = [pytest.mark.docker, pytest.mark.xdist_group("reaper")]
IMAGE = "aes-base:latest"

# Builds like reset_gate.build_fresh (no cache, owner-labelled) and prints the build stream.
BUILDER = """
import json, sys, docker
from aes_lib.sandbox.container import owner_labels
for chunk in docker.from_env().api.build(path=sys.argv[1], nocache=True, rm=True, forcerm=True,
                                         decode=True, pull=False, labels=owner_labels()):
    print(json.dumps(chunk), flush=True)
"""

# Lists the container's processes (cmdline, NULs dropped) without forking: works at the pid limit.
LIST_PROCESSES = (
    'for d in /proc/[0-9]*; do [ "${d#/proc/}" = $$ ] && continue; '
    'c=; read -r c 2>/dev/null < "$d/cmdline"; [ -n "$c" ] && echo "$c"; done; true'
)
KEPT = {"/sbin/docker-init--sleepinfinity", "sleepinfinity"}  # init and the keep-alive


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _labelled_image(client, labels: dict[str, str]) -> str:
    """A new untagged image on the base image carrying ``labels``; returns its id."""
    image = ""
    for chunk in client.api.build(fileobj=io.BytesIO(f"FROM {IMAGE}\n".encode()), labels=labels,
                                  rm=True, decode=True, pull=False):
        image = chunk.get("aux", {}).get("ID", image)
    assert image, "the build produced no image"
    return image


def _exists(client, image: str) -> bool:
    try:
        client.images.get(image)
        return True
    except docker.errors.ImageNotFound:
        return False


def _remove_images(client, images) -> None:
    for image in images:
        with contextlib.suppress(docker.errors.NotFound):
            client.images.remove(image, force=True)


async def test_reaper_removes_images_of_dead_owners_only(docker_client, make_task, monkeypatch) -> None:
    # A host name of our own: reapers of other processes on this host leave these images alone.
    host = f"test-{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(socket, "gethostname", lambda: host)
    dead = str(_dead_pid())
    test = {"aes.test": f"reap-{uuid.uuid4().hex[:8]}"}
    images = {
        "dead": _labelled_image(docker_client, {**owner_labels(), OWNER_PID_LABEL: dead, **test}),
        "live": _labelled_image(docker_client, {**owner_labels(), **test}),
        "other host": _labelled_image(docker_client, {**owner_labels(), OWNER_HOST_LABEL: "elsewhere",
                                                      OWNER_PID_LABEL: dead, **test}),
        # A build killed during its trailing LABEL steps: managed, its owner pid not yet applied.
        "ownerless": _labelled_image(docker_client, {MANAGED_LABEL: "1", **test}),
    }
    task = Task.load(make_task({"environment/input.txt": f"{uuid.uuid4().hex}\n"}))
    cached = await ImageCache(docker_client, kinds=DomainKinds()).build(task)
    time.sleep(2)  # all are older than the grace below
    try:
        removed = reap(docker_client, grace=1)
        assert {k for k, image in images.items() if _exists(docker_client, image)} == {"live", "other host"}
        assert images["dead"] in removed and images["ownerless"] in removed
        assert _exists(docker_client, cached)
        assert MANAGED_LABEL in docker_client.images.get(cached).labels
    finally:
        _remove_images(docker_client, [*images.values(), cached])


def test_build_killed_mid_way_leaves_nothing_after_reap(docker_client, tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(
        f"FROM {IMAGE}\nRUN echo {uuid.uuid4().hex} > /a\nRUN echo b > /b\nRUN sleep 60\n"
    )
    base = docker_client.images.get(IMAGE).id.removeprefix("sha256:")[:12]
    builder = subprocess.Popen([sys.executable, "-c", BUILDER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    steps, container = [], ""
    try:
        for line in builder.stdout:
            text = json.loads(line).get("stream", "")
            steps += [i for i in re.findall(r"---> ([0-9a-f]{12})$", text.strip()) if i != base]
            if (m := re.search(r"Running in ([0-9a-f]{12})", text)) and len(steps) == 2:
                container = m.group(1)
                break
        assert container, "the build ended before its sleep step"
        builder.send_signal(signal.SIGKILL)
        builder.wait()
        # The daemon removes the killed step's container itself; the committed steps stay.
        deadline = time.monotonic() + 20
        while docker_client.containers.list(all=True, filters={"id": container}) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not docker_client.containers.list(all=True, filters={"id": container})
        assert all(_exists(docker_client, s) for s in steps)
        time.sleep(2)  # older than the grace below
        # Whoever reaps first removes them: a reaper on the other pytest worker may beat ours.
        reap(docker_client, grace=1)
        assert not any(_exists(docker_client, s) for s in steps)
    finally:
        if builder.poll() is None:
            builder.kill()
            builder.wait()
        _remove_images(docker_client, reversed(steps))  # children first


# A hang guard, not a speed check: the setsid'd loop holds the exec's output open forever, so an
# exec that waited for its tree would never return (it took ~4 s idle, ~16 s in a full run).
@pytest.mark.timeout(180)
async def test_timed_out_exec_loses_its_whole_tree(docker_client, test_label) -> None:
    # A setsid'd loop, an env -i process (no marker) and a fork bomb filling the pid limit.
    tree = (
        "setsid sh -c 'while :; do sleep 1 & sleep 0.1; done' & env -i /bin/sleep 1012 & "
        "b() { b | b & }; b; sleep 1000"
    )
    async with Sandbox.start(IMAGE, Limits(pids=64), client=docker_client, labels=test_label) as sb:
        await sb.exec("nohup sleep 1011 >/dev/null 2>&1 &", timeout=30, user="nobody")
        r = await sb.exec(tree, timeout=3, user="nobody")
        left = await sb.exec(LIST_PROCESSES, timeout=30)
    assert r.timed_out and r.exit_code is None
    assert set(left.output.split()) == KEPT | {"sleep1011"}  # the earlier exec's process survives


async def test_kill_all_ends_a_fork_bomb_at_the_pid_limit(docker_client, test_label) -> None:
    async with Sandbox.start(IMAGE, Limits(pids=64), client=docker_client, labels=test_label) as sb:
        bomb = await sb.exec("b() { b | b & }; b", timeout=30)  # returns at once, the bomb goes on
        # Counted from the host: with the pid limit reached, an exec may find no pid to start in.
        async def filled() -> bool:
            return len((await asyncio.to_thread(sb.container.top))["Processes"]) > 30

        await eventually(filled, "the fork bomb to fill the container (over 30 processes)", timeout=10)
        await sb.kill_all()
        left = await sb.exec(LIST_PROCESSES, timeout=30)
        forks = await sb.exec("echo $(echo forked)", timeout=30)
    assert not bomb.timed_out
    assert set(left.output.split()) == KEPT
    assert forks.output.strip() == "forked"


def test_reaper_removes_services_networks_of_dead_owners_only(docker_client, monkeypatch) -> None:
    host = f"test-{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(socket, "gethostname", lambda: host)
    base = {**owner_labels(), SERVICES_NETWORK_LABEL: "1"}
    nets = {
        "dead": docker_client.networks.create(f"aes-net-test-{uuid.uuid4().hex[:8]}", internal=True,
                                              labels={**base, OWNER_PID_LABEL: str(_dead_pid())}),
        "live": docker_client.networks.create(f"aes-net-test-{uuid.uuid4().hex[:8]}", internal=True, labels=base),
    }
    try:
        removed = reap(docker_client)
        assert nets["dead"].name in removed and nets["live"].name not in removed
        assert [n.name for n in docker_client.networks.list(names=[nets["live"].name])] == [nets["live"].name]
        assert docker_client.networks.list(names=[nets["dead"].name]) == []
    finally:
        for n in nets.values():
            with contextlib.suppress(docker.errors.NotFound):
                n.remove()


def test_reaper_removes_compose_volumes_of_dead_owners_only(docker_client, monkeypatch) -> None:
    host = f"test-{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(socket, "gethostname", lambda: host)
    base = {**owner_labels(), SERVICES_NETWORK_LABEL: "1"}
    vols = {
        "dead": docker_client.volumes.create(f"aes-vol-test-{uuid.uuid4().hex[:8]}",
                                             labels={**base, OWNER_PID_LABEL: str(_dead_pid())}),
        "live": docker_client.volumes.create(f"aes-vol-test-{uuid.uuid4().hex[:8]}", labels=base),
    }
    try:
        removed = reap(docker_client)
        assert vols["dead"].name in removed and vols["live"].name not in removed
        assert [v.name for v in docker_client.volumes.list(filters={"name": vols["live"].name})] == [vols["live"].name]
    finally:
        for v in vols.values():
            with contextlib.suppress(docker.errors.NotFound):
                v.remove(force=True)
