"""Remove sandbox containers whose owning process has died (a crash skipped cleanup)."""

from __future__ import annotations

import asyncio
import os
import socket

import docker
import docker.errors

from aes_lib.sandbox.container import MANAGED_LABEL, OWNER_HOST_LABEL, OWNER_PID_LABEL


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap(client: docker.DockerClient | None = None) -> list[str]:
    """Remove this host's managed containers whose owner pid is gone; returns their names."""
    client = client or docker.from_env()
    host = socket.gethostname()
    removed = []
    for c in client.containers.list(all=True, filters={"label": f"{MANAGED_LABEL}=1"}):
        labels = c.labels
        if labels.get(OWNER_HOST_LABEL) != host:
            continue
        try:
            pid = int(labels.get(OWNER_PID_LABEL, ""))
        except ValueError:
            continue
        if not _alive(pid):
            try:
                c.remove(force=True)
                removed.append(c.name)
            except docker.errors.NotFound:
                pass
    return removed


async def reap_async(client: docker.DockerClient | None = None) -> list[str]:
    return await asyncio.to_thread(reap, client)
