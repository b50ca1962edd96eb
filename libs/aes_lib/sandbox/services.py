"""The services of a docker-compose task (``aes_lib.bundle.compose``), one set per trial.

``async with task_services(task, images, limits, labels) as net`` creates an internal
Docker network of the trial's own (no way out, no address of the host's, and no other
trial's containers on it: ``ISOLATED``), starts each service on it under its name, in dependency order,
each with the sandbox's limits (CPU, memory, pids, no new privileges, an init), waits for
what ``main`` depends on (started, or healthy by its healthcheck), and yields the network's
name for the agent's and the verifier's containers to join. The file's named volumes are fresh
Docker volumes of the trial's own, mounted only where a service names them. Everything is removed on exit;
the owner labels let the reaper remove what a crashed process left.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import docker
import docker.errors

from aes_lib.bundle import Task
from aes_lib.bundle.compose import Service
from aes_lib.sandbox.container import (
    SERVICES_NETWORK_LABEL, Limits, SandboxError, SandboxVerdict, join_network, owner_labels,
)
from aes_lib.sandbox.images import ImageCache

ISOLATED = {"com.docker.network.bridge.inhibit_ipv4": "true"}
"""An internal network still gives its containers a route to the host's end of the bridge, so
every host address answers (a service bound to 0.0.0.0 on the host is reachable). With no
address on the host's end, the containers reach each other and nothing else."""
READY_TIMEOUT = 120.0
"""Seconds a service may take to start or become healthy."""


@asynccontextmanager
async def task_services(task: Task, images: ImageCache, limits: Limits,
                        labels: dict[str, str] | None = None) -> AsyncIterator[str | None]:
    """The name of a network with the task's services up, or None for a task without any."""
    spec = task.compose
    if spec is None or not spec.services:
        yield None
        return
    client = images.client
    all_labels = {**owner_labels(), **(labels or {})}
    service_images = await asyncio.gather(*(images.service_image(task, s) for s in spec.services))
    try:
        network = await asyncio.to_thread(client.networks.create, f"aes-net-{uuid.uuid4().hex[:12]}", driver="bridge",
                                          internal=True, options=ISOLATED,
                                          labels={**all_labels, SERVICES_NETWORK_LABEL: "1"})
    except docker.errors.DockerException as e:
        raise SandboxError(f"cannot create the services' network: {e}") from e
    started: dict = {}
    volumes: dict = {}
    try:
        for name in spec.volumes:
            volumes[name] = await asyncio.to_thread(client.volumes.create, f"aes-vol-{uuid.uuid4().hex[:12]}",
                                                    labels={**all_labels, SERVICES_NETWORK_LABEL: "1"})
        for service, image in zip(spec.services, service_images):
            await _wait(client, {d: started[d] for d in service.depends_on}, service.depends_on)
            mounts = {volumes[v].name: {"bind": path, "mode": "rw"} for v, path in service.volumes.items()}
            started[service.name] = await _start(client, service, image, network.name, limits, all_labels, mounts)
        await _wait(client, {d: started[d] for d in spec.main_depends_on}, spec.main_depends_on)
        yield network.name
    except docker.errors.DockerException as e:
        raise SandboxError(f"cannot create the services' volumes: {e}") from e
    finally:
        await asyncio.gather(*(asyncio.to_thread(_remove, c) for c in started.values()))
        await asyncio.gather(*(asyncio.to_thread(_remove, v) for v in volumes.values()))
        try:
            await asyncio.to_thread(network.remove)
        except docker.errors.APIError:
            pass  # still in use by a container being removed: the reaper finishes it


async def _start(client: docker.DockerClient, service: Service, image: str, network: str, limits: Limits,
                 labels: dict[str, str], volumes: dict[str, dict]):
    try:
        return await asyncio.to_thread(
            client.containers.run, image,
            command=service.command, entrypoint=service.entrypoint, environment=service.environment,
            working_dir=service.working_dir, user=service.user, detach=True, init=True,
            name=f"aes-{service.name}-{uuid.uuid4().hex[:8]}", labels=labels,
            **limits.run_args(), healthcheck=_healthcheck(service), volumes=volumes or None,
            **join_network(client, network, service.name, None),
        )
    except docker.errors.DockerException as e:
        raise SandboxError(f"service {service.name}: cannot start from {image}: {e}") from e


def _healthcheck(service: Service) -> dict | None:
    hc = service.healthcheck
    if hc is None:
        return None
    ns = int(hc.interval * 1e9)
    return {"test": ["CMD", *hc.test], "interval": ns, "timeout": max(ns, int(5e9)), "retries": hc.retries}


async def _wait(client: docker.DockerClient, containers: dict, conditions: dict[str, str]) -> None:
    """Until each container is running (and healthy where its condition says so); a service that
    does not get there is the task's failure (``SandboxVerdict``)."""
    deadline = time.monotonic() + READY_TIMEOUT
    for name, container in containers.items():
        while True:
            await asyncio.to_thread(container.reload)
            state = container.attrs["State"]
            if state["Status"] in ("exited", "dead"):
                logs = (await asyncio.to_thread(container.logs, tail=20)).decode(errors="replace")
                raise SandboxVerdict(f"service {name} exited with {state.get('ExitCode')}: {logs}")
            health = (state.get("Health") or {}).get("Status")
            if conditions[name] != "service_healthy" and state["Status"] == "running":
                break
            if health == "healthy":
                break
            if health == "unhealthy":
                raise SandboxVerdict(f"service {name} is unhealthy: its healthcheck kept failing")
            if time.monotonic() > deadline:
                raise SandboxVerdict(f"service {name} not ready after {READY_TIMEOUT:.0f}s")
            await asyncio.sleep(0.2)


def _remove(thing) -> None:
    """Remove a container or a volume."""
    try:
        thing.remove(force=True)
    except docker.errors.NotFound:
        pass
