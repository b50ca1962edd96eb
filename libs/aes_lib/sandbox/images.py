"""Build each task's image once, tagged by the content hash of its environment/."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import stat
import tempfile
import time
from pathlib import Path

import docker
import docker.errors
import requests.exceptions
import urllib3.exceptions

from aes_lib import telemetry
from aes_lib.bundle import Task
from aes_lib.bundle.task import walk
from aes_lib.config import Settings
from aes_lib.domains.base import Domain
from aes_lib.domains.registry import by_image
from aes_lib.sandbox.container import MANAGED_LABEL

IMAGE_REPO = "aes-env"
DOMAIN_RECIPE_LABEL = "aes.domain-recipe"
"""On a domain's image: the content hash of the recipe it was built from."""
FROM_LINE = re.compile(r"^(\s*FROM\s+(?:--\S+\s+)*)(\S+)(.*)$", re.IGNORECASE | re.MULTILINE)
"""A Dockerfile's ``FROM [--flag...] IMAGE [AS NAME]``: (prefix, image, rest)."""
PULL_TIMEOUT = 60.0
"""Seconds a pull of a task's ``docker_image`` may take before the image counts as unavailable."""
logger = logging.getLogger("aes.sandbox")


class BuildFailedError(RuntimeError):
    """The environment's image did not build; ``log`` holds the build output."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


class BuildTimeoutError(BuildFailedError):
    """The build ran past ``[environment].build_timeout_sec``."""


def environment_hash(env_dir: Path) -> str:
    """sha256 over the sorted paths, kinds, exec bits and contents of ``env_dir``."""
    h = hashlib.sha256()
    for rel, st in sorted(walk(env_dir)):
        h.update(rel.encode() + b"\0")
        if stat.S_ISLNK(st.st_mode):
            h.update(b"L" + str(Path(env_dir / rel).readlink()).encode())
        elif stat.S_ISREG(st.st_mode):
            h.update(b"X" if st.st_mode & 0o100 else b"F")
            h.update(hashlib.sha256((env_dir / rel).read_bytes()).digest())
        else:
            h.update(b"D")
        h.update(b"\0")
    return h.hexdigest()


class ImageCache:
    """``await build(task)`` returns an image tag, building only when it is absent.

    ``max_build_timeout`` caps any task's ``build_timeout_sec``.
    """

    def __init__(self, client: docker.DockerClient | None = None, max_build_timeout: float = 1800.0) -> None:
        self.client = client or docker.from_env()
        self.max_build_timeout = max_build_timeout
        self._locks: dict[str, asyncio.Lock] = {}

    async def build(self, task: Task) -> str:
        env = task.config.environment
        dockerfile = task.environment_dir / "Dockerfile"
        if env.docker_image:
            # As in Harbor, a prebuilt image is preferred to the Dockerfile. Offline, an image
            # that is neither local nor pullable falls back to the Dockerfile when there is one
            # (what Harbor's --force-build would run).
            try:
                return await self._existing(env.docker_image)
            except BuildFailedError as e:
                if not dockerfile.is_file():
                    raise
                logger.warning("%s: %s; building environment/Dockerfile instead", task.name, e)
        if not dockerfile.is_file():
            raise BuildFailedError("only environment/Dockerfile is supported (no docker-compose.yaml)")
        # A task on a domain's image is rebuilt when that image's recipe changes.
        domain_ids = [await self.domain_image(d) for d in referenced_domains(dockerfile)]
        tag = f"{IMAGE_REPO}:{_tag_hash(environment_hash(task.environment_dir), domain_ids)}"
        lock = self._locks.setdefault(tag, asyncio.Lock())
        with telemetry.tracer().start_as_current_span("image build", attributes={"aes.image": tag}) as span:
            async with lock:  # concurrent validations of one environment share one build
                cached = await self._present(tag)
                span.set_attribute("aes.cached", cached)
                if not cached:
                    timeout = min(env.build_timeout_sec, self.max_build_timeout)
                    await asyncio.to_thread(self._build, task.environment_dir, tag, timeout)
        return tag

    async def domain_image(self, domain: Domain) -> str:
        """Build ``domain.image`` from its recipe unless an image of this recipe exists;
        returns the recipe's hash (what the tag's label records)."""
        assert domain.image and domain.image_dir
        recipe = environment_hash(domain.image_dir)
        lock = self._locks.setdefault(domain.image, asyncio.Lock())
        async with lock:
            if await asyncio.to_thread(_label, self.client, domain.image, DOMAIN_RECIPE_LABEL) != recipe:
                logger.info("building %s from %s", domain.image, domain.image_dir)
                with telemetry.tracer().start_as_current_span("image build", attributes={"aes.image": domain.image}):
                    await asyncio.to_thread(build_image, self.client, domain.image_dir, self.max_build_timeout,
                                            tag=domain.image, labels={DOMAIN_RECIPE_LABEL: recipe})
        return recipe

    async def _present(self, tag: str) -> bool:
        try:
            await asyncio.to_thread(self.client.images.get, tag)
            return True
        except docker.errors.ImageNotFound:
            return False

    async def _existing(self, image: str) -> str:
        """``image`` when present locally or pulled within ``PULL_TIMEOUT`` seconds."""
        try:
            if await self._present(image):
                return image
        except docker.errors.APIError as e:  # e.g. an invalid reference
            raise BuildFailedError(f"docker_image {image}: {e.explanation or e}") from e
        lock = self._locks.setdefault(f"pull:{image}", asyncio.Lock())
        async with lock:  # concurrent tasks on one image share one pull
            if await self._present(image):
                return image
            try:
                await asyncio.wait_for(asyncio.to_thread(self.client.images.pull, image), PULL_TIMEOUT)
            except (docker.errors.APIError, requests.exceptions.RequestException, TimeoutError) as e:
                logger.info("pull of %s failed: %s", image, e)
            if await self._present(image):
                return image
        raise BuildFailedError(f"docker_image {image} is not present locally and could not be pulled (no registry "
                               "reachable): load it with `docker load` or build it")

    def _build(self, context: Path, tag: str, timeout: float) -> None:
        # No owner labels: the cache outlives the process that built it, so the reaper keeps it.
        build_image(self.client, context, timeout, tag=tag, labels={MANAGED_LABEL: "1"})


def referenced_domains(dockerfile: Path) -> list[Domain]:
    """The domains whose images ``dockerfile``'s FROM lines name."""
    text = dockerfile.read_text(encoding="utf-8", errors="surrogateescape")
    found = (by_image(m.group(2)) for m in FROM_LINE.finditer(text))
    return list({d.name: d for d in found if d is not None}.values())


def _tag_hash(env_hash: str, domain_recipes: list[str]) -> str:
    if not domain_recipes:
        return env_hash[:32]
    return hashlib.sha256("\0".join([env_hash, *domain_recipes]).encode()).hexdigest()[:32]


def _label(client: docker.DockerClient, image: str, label: str) -> str | None:
    try:
        return (client.images.get(image).labels or {}).get(label)
    except docker.errors.ImageNotFound:
        return None


def gpu_engine(client: docker.DockerClient) -> bool:
    """Whether containers of this Docker engine can be given GPUs (an NVIDIA runtime)."""
    runtimes = client.info().get("Runtimes") or {}
    return "nvidia" in runtimes


def build_image(client: docker.DockerClient, context: Path, timeout: float, **options: object) -> str:
    """Build ``context`` (``options`` go to the build API: tag, labels, nocache...); returns
    the image id. ``BuildFailedError`` for the task's fault, ``BuildTimeoutError`` past
    ``timeout``; a daemon that goes away earlier raises its connection error (transient).
    """
    # The deadline stops a chatty build, the HTTP read timeout a silent one; either
    # way the connection closes and the daemon cancels the build.
    deadline = time.monotonic() + timeout
    log: list[str] = []
    image = ""
    # surrogateescape: a task's Dockerfile need not be UTF-8, and its bytes go back unchanged.
    text = (context / "Dockerfile").read_text(encoding="utf-8", errors="surrogateescape")
    dockerfile, substituted = substitute_bases(client, text, Settings.from_env().base_image_fallback)
    for original, fallback in substituted.items():
        note = f"aes: {original} is neither local nor pullable; built FROM {fallback} (AES_BASE_IMAGE_FALLBACK)"
        log.append(note + "\n")
        logger.warning("%s: %s", context, note)
    with tempfile.TemporaryDirectory(prefix="aes-build-") as tmp:
        if substituted:  # a rewritten copy outside the context: the task's files stay as they are
            (Path(tmp) / "Dockerfile").write_text(dockerfile, encoding="utf-8", errors="surrogateescape")
            options["dockerfile"] = str(Path(tmp) / "Dockerfile")
        # The client reads the Dockerfile and sends the context before it returns.
        stream = client.api.build(path=str(context), rm=True, forcerm=True, decode=True, pull=False,
                                  timeout=timeout, **options)
    try:
        for chunk in stream:
            log.append(chunk.get("stream", ""))
            if "error" in chunk:
                log.append(chunk["error"])
                raise BuildFailedError(f"build failed: {chunk['error'].strip()}", "".join(log))
            image = chunk.get("aux", {}).get("ID", image)
            if time.monotonic() > deadline:
                raise BuildTimeoutError(f"build exceeded {timeout:.0f}s", "".join(log))
    except (requests.exceptions.RequestException, urllib3.exceptions.HTTPError) as e:
        if time.monotonic() < deadline:
            raise  # the daemon went away: not the task's fault, let the caller retry
        raise BuildTimeoutError(f"build exceeded {timeout:.0f}s", "".join(log)) from e
    except docker.errors.APIError as e:
        raise BuildFailedError(f"build failed: {e}", "".join(log)) from e
    finally:
        stream.close()
    if not image:
        raise BuildFailedError("build finished without an image id", "".join(log))
    return image


def substitute_bases(client: docker.DockerClient, dockerfile: str, fallback: str) -> tuple[str, dict[str, str]]:
    """``dockerfile`` with each ``FROM`` image that is neither local nor pullable replaced by
    ``fallback`` (none when it is empty), and ``{original: fallback}`` for those replaced.

    Harbor tasks often say ``FROM debian:bookworm`` or ``python:3.x-slim``; with no registry
    they build on the local base instead of failing. Earlier stages' names, ``scratch`` and
    ``$ARG`` references are kept as written.
    """
    stages: set[str] = set()
    substituted: dict[str, str] = {}

    def rewrite(m: re.Match[str]) -> str:
        prefix, image, rest = m.groups()
        keep = (not fallback or image.lower() in stages | {"scratch"} or "$" in image
                or (image not in substituted and _available(client, image)))
        if alias := re.match(r"\s+AS\s+(\S+)", rest, re.IGNORECASE):
            stages.add(alias.group(1).lower())
        if keep:
            return m.group(0)
        substituted[image] = fallback
        return prefix + fallback + rest

    return FROM_LINE.sub(rewrite, dockerfile), substituted


def _available(client: docker.DockerClient, image: str) -> bool:
    """Present locally, or pulled now (what the build would have done)."""
    try:
        client.images.get(image)
        return True
    except docker.errors.ImageNotFound:
        pass
    try:
        client.images.pull(image)
        return True
    except docker.errors.APIError:
        return False
