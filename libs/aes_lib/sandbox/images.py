"""Build each task's image once, tagged by the content hash of its environment/."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import re
import signal
import stat
import tempfile
import time
import uuid
from pathlib import Path

import docker
import docker.errors
import docker.utils
from docker.api.build import process_dockerfile
import msgspec
import requests.exceptions
import urllib3.exceptions

from aes_lib import telemetry
from aes_lib.bundle import Task
from aes_lib.bundle.compose import Service
from aes_lib.bundle.config import EnvironmentConfig
from aes_lib.bundle.task import walk
from aes_lib.config import Settings
from aes_lib.sandbox.container import MANAGED_LABEL, LimitCaps, Limits, egress_network, local_engine
from aes_lib.sandbox.kinds import TaskKinds

IMAGE_REPO = "aes-env"
DOMAIN_RECIPE_LABEL = "aes.domain-recipe"
"""On a base image built from a recipe (a domain's image): the content hash of that recipe."""
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


BUILD_CGROUP_PREFIX = "aes-build-"
"""Name of each limited build's own cgroup parent (plus a random suffix)."""
CGROUP_ROOT = Path("/sys/fs/cgroup")
_REASONS = (
    # (pattern in the log or error, reason): the first that matches names the cause.
    (re.compile(r"fork: (retry: )?Resource temporarily unavailable|BlockingIOError|can't fork|"
                r"Cannot fork|pthread_create failed", re.IGNORECASE),
     "process limit reached ({pids} processes): fork: Resource temporarily unavailable"),
    (re.compile(r"returned a non-zero code: 137|MemoryError|Cannot allocate memory|out of memory|"
                r"\bOOM\b|\bKilled\b", re.IGNORECASE),
     "out of memory: a RUN step exceeded the build's {memory_mb} MiB limit (killed, exit 137)"),
    (re.compile(r"Network is unreachable|Temporary failure in name resolution|Could not resolve|"
                r"Name or service not known|getaddrinfo failed|No address associated|"
                r"Failed to establish a new connection|Connection (refused|timed out)|No route to host", re.IGNORECASE),
     "network unreachable: a task's image build is offline or egress-only (build network: {network})"),
)
"""Why a limited build failed, recognised in its output."""


def failure_reason(text: str, limits: Limits | None, network: str) -> str:
    """The specific cause of a failed build recognised in ``text`` (its log and error), or ""."""
    if limits is None:
        return ""
    for pattern, reason in _REASONS:
        if pattern.search(text):
            return reason.format(pids=limits.pids, memory_mb=limits.memory_mb, network=network)
    return ""


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

    ``max_build_timeout`` caps any task's ``build_timeout_sec``. ``kinds``: the base images
    with recipes and each task's startup command (the domains'); required, so that no caller
    runs a domain's task without its image recipe or its services.
    """

    def __init__(self, client: docker.DockerClient | None = None, max_build_timeout: float = 1800.0,
                 caps: LimitCaps | None = None, *, kinds: TaskKinds) -> None:
        self.client = client or docker.from_env()
        self.kinds = kinds
        self.max_build_timeout = max_build_timeout
        self.caps = caps or LimitCaps()
        """Limits of task builds, as of sandboxes: the task's [environment] request capped by
        these; the network only under the policy of ``Limits.for_task``."""
        self._locks: dict[str, asyncio.Lock] = {}

    async def build(self, task: Task) -> str:
        """The image of the task's agent container (``docker_image`` or environment/Dockerfile),
        after every other image its trials use (compose services, a separate verifier's): a
        build failure of any of them is the task's, reported here."""
        main = await self.build_folder(task.name, task.config.environment, task.main_context)
        for service in task.compose.services if task.compose else ():
            await self.service_image(task, service)
        if task.config.verifier.separate:
            await self.verifier_image(task, main)
        return main

    async def service_image(self, task: Task, service: Service) -> str:
        """A compose service's image: its ``image``, or its build folder under the task's limits."""
        if service.build is None:
            assert service.image
            return await self.existing(service.image)
        env = msgspec.structs.replace(task.config.environment, docker_image=None)
        return await self.build_folder(f"{task.name} service {service.name}", env, task.environment_dir / service.build)

    async def verifier_image(self, task: Task, main: str) -> tuple[str, bool]:
        """The image of a separate verifier (Harbor's precedence: ``[verifier.environment]
        docker_image``, then tests/Dockerfile, then ``main``, the task's own image) and whether
        it holds the tests itself."""
        venv = task.config.verifier.environment
        if venv is not None and venv.docker_image:
            return await self.existing(venv.docker_image), True
        if (task.tests_dir / "Dockerfile").is_file():
            cfg = venv or task.config.environment
            return await self.build_folder(task.name, msgspec.structs.replace(cfg, docker_image=None),
                                           task.tests_dir), True
        return main, False

    async def build_folder(self, name: str, env: EnvironmentConfig, context: Path) -> str:
        """``env.docker_image`` if set (and present or pullable), else the image of
        ``context``/Dockerfile, built under ``env``'s limits unless an image of the same
        content exists."""
        dockerfile = context / "Dockerfile"
        if env.docker_image:
            # As in Harbor, a prebuilt image is preferred to the Dockerfile. Offline, an image
            # that is neither local nor pullable falls back to the Dockerfile when there is one
            # (what Harbor's --force-build would run).
            try:
                return await self.existing(env.docker_image)
            except BuildFailedError as e:
                if not dockerfile.is_file():
                    raise
                logger.warning("%s: %s; building %s instead", name, e, dockerfile)
        if not dockerfile.is_file():
            raise BuildFailedError(f"{context.name}/Dockerfile is missing (and no docker_image is set)")
        # A task on a domain's image is rebuilt when that image's recipe changes.
        recipes = [await self.base_image(image) for image in base_images(dockerfile, self.kinds)]
        tag = f"{IMAGE_REPO}:{_tag_hash(environment_hash(context), recipes)}"
        lock = self._locks.setdefault(tag, asyncio.Lock())
        with telemetry.tracer().start_as_current_span("image build", attributes={"aes.image": tag}) as span:
            async with lock:  # concurrent validations of one environment share one build
                cached = await self._present(tag)
                span.set_attribute("aes.cached", cached)
                if not cached:
                    timeout = min(env.build_timeout_sec, self.max_build_timeout)
                    limits = Limits.for_task(env, self.caps)
                    await asyncio.to_thread(self._build, context, tag, timeout, limits)
        return tag

    async def base_image(self, image: str) -> str:
        """Build ``image`` from its recipe unless an image of this recipe exists; returns the
        recipe's hash (what the tag's label records)."""
        folder = self.kinds.recipe(image)
        if folder is None:
            raise ValueError(f"{image} has no recipe to build it from")
        recipe = environment_hash(folder)
        lock = self._locks.setdefault(image, asyncio.Lock())
        async with lock:
            if await asyncio.to_thread(_label, self.client, image, DOMAIN_RECIPE_LABEL) != recipe:
                logger.info("building %s from %s", image, folder)
                # A TRUSTED recipe shipped with the code (not a task's): it keeps the default
                # network (its RUN steps apt-get) and no build limits.
                with telemetry.tracer().start_as_current_span("image build", attributes={"aes.image": image}):
                    await asyncio.to_thread(build_image, self.client, folder, self.max_build_timeout,
                                            trusted=True, tag=image, labels={DOMAIN_RECIPE_LABEL: recipe})
        return recipe

    async def _present(self, tag: str) -> bool:
        try:
            await asyncio.to_thread(self.client.images.get, tag)
            return True
        except docker.errors.ImageNotFound:
            return False

    async def existing(self, image: str) -> str:
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

    def _build(self, context: Path, tag: str, timeout: float, limits: Limits) -> None:
        # No owner labels: the cache outlives the process that built it, so the reaper keeps it.
        build_image(self.client, context, timeout, limits=limits, tag=tag, labels={MANAGED_LABEL: "1"})


def base_images(dockerfile: Path, kinds: TaskKinds) -> list[str]:
    """The images with a recipe (``kinds.recipe``) that ``dockerfile``'s FROM lines name, once each."""
    text = dockerfile.read_text(encoding="utf-8", errors="surrogateescape")
    named = dict.fromkeys(m.group(2) for m in FROM_LINE.finditer(text))
    return [image for image in named if kinds.recipe(image) is not None]


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


def build_image(client: docker.DockerClient, context: Path, timeout: float, *, limits: Limits | None = None,
                trusted: bool = False, tag: str | None = None, labels: dict[str, str] | None = None,
                nocache: bool = False) -> str:
    """Build ``context``; returns the image id. ``BuildFailedError`` for the task's fault (its
    message names the cause where one is recognised: out of memory, process limit, no network,
    time limit), ``BuildTimeoutError`` past ``timeout``; a daemon that goes away earlier
    raises its connection error (transient).

    An untrusted build (a task's: ``trusted`` False) runs its RUN steps with no network (the
    egress network where ``limits.network`` allows one), ``limits``' memory (swap included) and
    CPU quota, and at most ``limits.pids`` processes through a cgroup parent of its own (a local
    engine with the cgroupfs driver; elsewhere the pid limit is missing and a warning says so).
    Only the recipes shipped with the code (domain images) build ``trusted``: default network,
    no limits.
    """
    if not trusted:
        limits = limits or Limits()
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
    params: dict[str, object] = {"rm": True, "forcerm": True, "pull": False, "nocache": nocache}
    if tag:
        params["t"] = tag
    if labels:
        params["labels"] = json.dumps(labels)
    network = "default"
    cgroup = None
    if limits is not None:
        network = egress_network(client) if limits.network else "none"
        params.update(networkmode=network, memory=limits.memory_mb << 20, memswap=limits.memory_mb << 20,
                      cpuperiod=100_000, cpuquota=int(limits.cpus * 100_000))
        cgroup = BuildCgroup.create(client, limits.pids)
        if cgroup is not None:
            params["cgroupparent"] = cgroup.parent
        else:
            log.append(f"aes: no process limit for this build's RUN steps ({_no_cgroup_why(client)})\n")
    response = None
    try:
        with tempfile.TemporaryDirectory(prefix="aes-build-") as tmp:
            name = None
            if substituted:  # a rewritten copy outside the context: the task's files stay as they are
                (Path(tmp) / "Dockerfile").write_text(dockerfile, encoding="utf-8", errors="surrogateescape")
                name = str(Path(tmp) / "Dockerfile")
            # The client reads the Dockerfile and sends the context before it returns.
            response = _post_build(client, context, name, params, timeout)
        stream = client.api._stream_helper(response, decode=True)
        for chunk in stream:
            log.append(chunk.get("stream", ""))
            if "error" in chunk:
                log.append(chunk["error"])
                raise _failed(BuildFailedError, f"build failed: {chunk['error'].strip()}", log, limits, network)
            image = chunk.get("aux", {}).get("ID", image)
            if time.monotonic() > deadline:
                raise _failed(BuildTimeoutError, f"build exceeded {timeout:.0f}s", log, limits, network)
    except (requests.exceptions.RequestException, urllib3.exceptions.HTTPError) as e:
        if time.monotonic() < deadline:
            raise  # the daemon went away: not the task's fault, let the caller retry
        raise _failed(BuildTimeoutError, f"build exceeded {timeout:.0f}s", log, limits, network) from e
    except docker.errors.APIError as e:
        raise _failed(BuildFailedError, f"build failed: {e}", log, limits, network) from e
    finally:
        if response is not None:
            response.close()  # a build still running is cancelled by the daemon
        if cgroup is not None:
            cgroup.close()
    if not image:
        raise BuildFailedError("build finished without an image id", "".join(log))
    return image


def _failed(kind: type[BuildFailedError], message: str, log: list[str], limits: Limits | None,
            network: str) -> BuildFailedError:
    """``kind`` with ``message`` plus the recognised cause, which also ends the log."""
    reason = failure_reason(message + "\n" + "".join(log), limits, network)
    if kind is BuildTimeoutError:
        reason = f"time limit of {message.split()[-1]}" + (f"; {reason}" if reason else "")
    if reason:
        message = f"{message} ({reason})"
        log.append(("" if "".join(log[-1:]).endswith("\n") else "\n") + f"aes: {reason}\n")
    return kind(message, "".join(log))


def _post_build(client: docker.DockerClient, context: Path, dockerfile: str | None, params: dict[str, object],
                timeout: float):
    """POST /build of ``context`` (``dockerfile``: one outside it) with query ``params``; the
    streaming response. docker-py's ``build`` cannot send ``cgroupparent`` or the CPU quota."""
    api = client.api
    exclude = None
    ignore = context / ".dockerignore"
    if ignore.is_file():
        exclude = [line.strip() for line in ignore.read_text().splitlines() if line.strip() and line[0] != "#"]
    df = process_dockerfile(dockerfile, str(context))
    params = {**params, "dockerfile": df[0] if df else None}
    headers = {"Content-Type": "application/tar"}
    api._set_auth_headers(headers)
    with docker.utils.tar(str(context), exclude=exclude, dockerfile=df) as archive:
        return api._post(api._url("/build"), data=archive, params=params, headers=headers, stream=True,
                         timeout=timeout)


class BuildCgroup:
    """A cgroup of one build whose pids controller caps the processes of its RUN steps (passed
    as the build's ``cgroupparent``: the daemon creates each RUN container's cgroup under it).

    cgroup v1 (``/sys/fs/cgroup/pids/<name>``) and v2 (``/sys/fs/cgroup/<name>``) with the
    cgroupfs driver, on a local engine only (another host's cgroups are not ours to write);
    v2 is untested here. ``close`` kills whatever still runs in it and removes it from every
    hierarchy the daemon created it in.
    """

    def __init__(self, name: str, version: str) -> None:
        self.name, self.version = name, version
        self.parent = f"/{name}"

    @classmethod
    def create(cls, client: docker.DockerClient, pids: int) -> "BuildCgroup | None":
        """A new cgroup capped at ``pids`` processes, or None where that is not possible."""
        if _no_cgroup_why(client):
            return None
        version = _engine_cgroup(client)[1]
        _remove_stale(version)
        cg = cls(BUILD_CGROUP_PREFIX + uuid.uuid4().hex[:12], version)
        try:
            if version == "1":
                d = CGROUP_ROOT / "pids" / cg.name
                d.mkdir()
                (d / "pids.max").write_text(str(pids))
            else:
                d = CGROUP_ROOT / cg.name
                d.mkdir()
                (d / "pids.max").write_text(str(pids))
                (d / "cgroup.subtree_control").write_text("+pids")
        except OSError as e:
            logger.warning("no process limit for image builds: cannot set up cgroup %s: %s", cg.name, e)
            cg.close()
            return None
        return cg

    def _dirs(self) -> list[Path]:
        if self.version == "1":
            return [d for d in CGROUP_ROOT.glob(f"*/{self.name}") if d.is_dir() and not d.parent.is_symlink()]
        d = CGROUP_ROOT / self.name
        return [d] if d.is_dir() else []

    def pids(self) -> set[int]:
        """Every process still in the cgroup (its sub-cgroups included)."""
        found: set[int] = set()
        for d in self._dirs():
            for procs in d.rglob("cgroup.procs"):
                try:
                    found.update(int(p) for p in procs.read_text().split())
                except OSError:
                    pass
        return found

    def close(self, grace: float = 10.0) -> None:
        """Wait up to ``grace`` seconds for the daemon to stop the build's containers, kill
        what remains, and remove the cgroup."""
        end = time.monotonic() + grace
        while self.pids() and time.monotonic() < end:
            time.sleep(0.2)
        for _ in range(50):  # a fork bomb may still be forking: repeat until none is left
            left = self.pids()
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        for d in self._dirs():
            for sub in sorted((p for p in d.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
                _rmdir(sub)
            _rmdir(d)


STALE_CGROUP_AGE = 6 * 3600.0
"""Seconds after which a build cgroup left behind by a process that died mid-build is removed
(far beyond any build's time limit: a live build's cgroup must keep its pid limit)."""


def _remove_stale(version: str) -> None:
    pattern = f"*/{BUILD_CGROUP_PREFIX}*" if version == "1" else f"{BUILD_CGROUP_PREFIX}*"
    now = time.time()
    for d in CGROUP_ROOT.glob(pattern):
        try:
            if now - d.stat().st_mtime > STALE_CGROUP_AGE:
                d.rmdir()  # fails, harmlessly, while anything is in it
        except OSError:
            pass


def _rmdir(d: Path) -> None:
    for _ in range(20):
        try:
            d.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:  # busy for a moment after its last process died
            time.sleep(0.1)
    logger.warning("could not remove build cgroup %s", d)


_ENGINES: dict[int, tuple[str, str]] = {}


def _engine_cgroup(client: docker.DockerClient) -> tuple[str, str]:
    """(cgroup driver, cgroup version) of the engine, asked once per client."""
    if id(client) not in _ENGINES:
        info = client.info()
        _ENGINES[id(client)] = (str(info.get("CgroupDriver", "")), str(info.get("CgroupVersion", "1")))
    return _ENGINES[id(client)]


def _no_cgroup_why(client: docker.DockerClient) -> str:
    """Why builds on this engine get no cgroup parent; "" when they can."""
    if not local_engine(client):
        return f"the engine at {client.api.base_url} is not on this host"
    driver, _ = _engine_cgroup(client)
    if driver != "cgroupfs":
        return f"the engine's cgroup driver is {driver!r}, not cgroupfs"
    if not os.access(CGROUP_ROOT, os.W_OK) and not os.access(CGROUP_ROOT / "pids", os.W_OK):
        return f"{CGROUP_ROOT} is not writable here"
    return ""


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
