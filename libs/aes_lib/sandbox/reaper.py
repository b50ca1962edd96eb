"""Remove what a dead process left behind: its sandbox containers, its throw-away images, and
the dangling images of builds it was killed in.

Ownership is read from labels (``owner_labels()``). Content-cached images (``ImageCache``) never
carry owner labels and are tagged, so they are never reaped. The classic builder adds build
labels as trailing LABEL steps, so a build killed earlier leaves intermediate images that carry
only the base image's labels (the daemon itself removes the killed step's container): those are
recognised as dangling images built on our base image.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Mapping

import docker
import docker.errors

from aes_lib.sandbox.container import MANAGED_LABEL, OWNER_HOST_LABEL, OWNER_PID_LABEL, SERVICES_NETWORK_LABEL

BASE_LABEL = "aes.base.hash"
"""Set on aes-base:latest by deploy/build_base_image.sh; every image built on it inherits it."""

DANGLING_GRACE_SEC = 60.0
"""A live build's newest step image is dangling and unused for a moment before its next step
starts; an ownerless dangling image is reaped only once it is older than this."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _owner(labels: Mapping[str, str] | None) -> tuple[str, int] | None:
    """(host, pid) named by the owner labels, or None when they are absent or incomplete."""
    labels = labels or {}
    try:
        return labels[OWNER_HOST_LABEL], int(labels[OWNER_PID_LABEL])
    except (KeyError, ValueError):
        return None


def _dead_here(owner: tuple[str, int] | None, host: str) -> bool:
    return owner is not None and owner[0] == host and not _alive(owner[1])


def _remove_image(client: docker.DockerClient, image_id: str) -> bool:
    """Remove an image unless a container still uses it; its untagged parents go with it."""
    try:
        client.images.remove(image_id)
    except docker.errors.NotFound:
        return False
    except docker.errors.APIError as e:
        if e.status_code == 409:  # in use by a container (e.g. a live build's step) or has children
            return False
        raise
    return True


def _reap_containers(client: docker.DockerClient, host: str) -> list[str]:
    # Replicas starting together reap together: a container another one is removing (or
    # removed between our list and inspect) is theirs, not an error.
    removed = []
    for c in client.containers.list(all=True, filters={"label": f"{MANAGED_LABEL}=1"}, ignore_removed=True):
        if _dead_here(_owner(c.labels), host):
            try:
                c.remove(force=True)
                removed.append(c.name)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as e:
                if e.status_code != 409:  # "removal ... is already in progress"
                    raise
    return removed


def _reap_networks(client: docker.DockerClient, host: str) -> list[str]:
    removed = []
    for net in client.networks.list(filters={"label": f"{SERVICES_NETWORK_LABEL}=1"}):
        if _dead_here(_owner(net.attrs.get("Labels")), host):
            try:
                net.remove()
                removed.append(net.name)
            except docker.errors.NotFound:
                pass
    return removed


def _reap_volumes(client: docker.DockerClient, host: str) -> list[str]:
    """Compose tasks' named volumes (``aes_lib.sandbox.services``) of dead owners."""
    removed = []
    for vol in client.volumes.list(filters={"label": f"{SERVICES_NETWORK_LABEL}=1"}):
        if _dead_here(_owner(vol.attrs.get("Labels")), host):
            try:
                vol.remove(force=True)
                removed.append(vol.name)
            except docker.errors.NotFound:
                pass
    return removed


def _reap_images(client: docker.DockerClient, host: str, grace: float) -> list[str]:
    removed = []
    for img in client.api.images(filters={"label": f"{MANAGED_LABEL}=1"}):
        if _dead_here(_owner(img["Labels"]), host) and _remove_image(client, img["Id"]):
            removed.append(img["Id"])
    cutoff = time.time() - grace
    for img in client.api.images(filters={"dangling": True}):
        labels = img["Labels"] or {}
        ours = MANAGED_LABEL in labels or BASE_LABEL in labels
        # An owned image is the owner rule's business (kept while its owner lives).
        if ours and _owner(labels) is None and img["Created"] < cutoff and _remove_image(client, img["Id"]):
            removed.append(img["Id"])
    return removed


def reap(client: docker.DockerClient | None = None, grace: float = DANGLING_GRACE_SEC) -> list[str]:
    """Remove this host's managed containers, services networks and images whose owner pid is
    gone, then dangling
    images of our builds that no live owner claims and that are older than ``grace`` seconds.

    Returns the removed containers' names and images' ids (``sha256:...``).
    """
    client = client or docker.from_env()
    host = socket.gethostname()
    removed = _reap_containers(client, host)  # first: their images and networks are then unused
    return removed + _reap_networks(client, host) + _reap_volumes(client, host) + _reap_images(client, host, grace)


async def reap_async(client: docker.DockerClient | None = None, grace: float = DANGLING_GRACE_SEC) -> list[str]:
    return await asyncio.to_thread(reap, client, grace)
