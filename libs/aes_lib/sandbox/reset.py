"""Reset check: two independent builds of a task's environment must start from the same state,
and the reference solution must still pass on the rebuild.

A task whose image bakes in the build time, a random value or anything else that
changes from build to build cannot be reset to a known initial state, so its
rollouts are not comparable. ``check_reset`` builds ``environment/`` twice with the
build cache off, creates (never starts) one container from each image, and
compares a manifest of the task-relevant paths: the working directory plus every
absolute path named in the instruction, tests or solution, plus ``AES_RESET_PATHS``.
An entry is (kind, mode, uid, gid, size, sha256 or link target); mtimes are
ignored, as are paths that differ in every build whatever the task does
(``/proc``, ``/sys``, ``/dev``, ``/tmp``, ``/run``, Python bytecode caches, git's
stat cache and reflogs). The container is only created, so the state compared is
exactly what a sandbox starts from (sandboxes replace the entrypoint). When the two
states agree, the reference solution runs as a trial on the second build and must
score 1.0: a task that works only from the validator's cached image is not reset. An imported
task without a reference solution gets the state comparison alone, and the report says the
oracle run was skipped.
"""

from __future__ import annotations

import asyncio
import dataclasses
import fnmatch
import hashlib
import io
import posixpath
import re
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import docker
import docker.errors

from aes_lib.bundle import Task
from aes_lib.bundle.config import parse_task_toml
from aes_lib.bundle.errors import BundleError
from aes_lib.sandbox.container import MANAGED_LABEL, Limits, owner_labels
from aes_lib.sandbox.images import BuildFailedError, ImageCache, base_images, build_image
from aes_lib.sandbox.trial import OracleAgent, run_trial

EXCLUDED_ROOTS = ("/proc", "/sys", "/dev", "/tmp", "/run", "/logs", "/tests", "/solution")
"""Never compared: kernel and runtime mounts, scratch space, and what the harness copies in."""
VOLATILE_PATTERNS = ("*/__pycache__", "*/__pycache__/*", "*.pyc", "*/.git/index", "*/.git/logs", "*/.git/logs/*")
"""Paths that change with build time even when the task is deterministic."""
MAX_ROOTS = 32
"""Most paths compared per task (workdir first), so a path-heavy instruction stays cheap."""
MAX_REPORTED = 20
"""Differing paths named in the verdict's detail."""

_SHEBANG = re.compile(r"^#!.*$", re.MULTILINE)  # an interpreter path is not task state
_ABS_PATH = re.compile(r"(?<![\w./~*<>-])/(?:[\w.@+-]+/?)+")  # not after a word, URL, glob or tag


class Entry(NamedTuple):
    """What is compared of one path (never its mtime)."""

    kind: str
    """``file`` | ``dir`` | ``symlink`` | ``hardlink`` | ``device`` | ``other`` | ``absent``."""
    mode: int = 0
    uid: int = 0
    gid: int = 0
    size: int = 0
    content: str = ""
    """sha256 of a file, target of a link, ``major:minor`` of a device."""


ABSENT = Entry("absent")
Manifest = dict[str, Entry]


@dataclasses.dataclass(frozen=True)
class ResetReport:
    ok: bool
    reason: str
    """``ok`` | ``state_differs`` | ``build_failed`` | ``oracle_failed_after_reset`` | ``not_applicable``."""
    detail: str = ""
    differing: tuple[str, ...] = ()
    """Paths whose entries differ between the two builds (sorted)."""
    roots: tuple[str, ...] = ()
    """Paths that were compared."""
    logs: str = ""
    """The reference solution's agent and verifier output when it failed on the rebuild."""


def task_roots(task: Task, image_workdir: str, extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Workdir, then absolute paths named in the task's text, minus excluded and nested ones."""
    texts = [task.instruction]
    for folder in (task.tests_dir, task.solution_dir):
        for path in sorted(folder.rglob("*")) if folder.is_dir() else ():
            if path.is_file():
                texts.append(path.read_text(encoding="utf-8", errors="replace"))
    candidates = [task.config.environment.workdir or image_workdir or "/", *extra]
    for text in texts:
        candidates += _ABS_PATH.findall(_SHEBANG.sub("", text))
    roots: list[str] = []
    for raw in candidates:
        path = posixpath.normpath(raw.rstrip(".,:;"))
        if not path.startswith("/") or _excluded(path) or path in roots:
            continue
        roots.append(path)
    kept = [r for r in roots if not any(_under(r, other) for other in roots if other != r)]
    return tuple(kept[:MAX_ROOTS])


def _under(path: str, root: str) -> bool:
    return root == "/" or path.startswith(root.rstrip("/") + "/")


def _excluded(path: str) -> bool:
    if path != "/" and any(path == r or _under(path, r) for r in EXCLUDED_ROOTS):
        return True
    return any(fnmatch.fnmatchcase(path, p) for p in VOLATILE_PATTERNS)


class _ChunkReader(io.RawIOBase):
    """A file-like view of an iterator of byte chunks (Docker's archive stream)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks, self._buf = chunks, b""

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        while not self._buf:
            self._buf = next(self._chunks, b"")
            if not self._buf:
                return 0
        n = min(len(b), len(self._buf))
        b[:n], self._buf = self._buf[:n], self._buf[n:]
        return n


def manifest_of_tar(stream: io.RawIOBase, parent: str) -> Manifest:
    """Manifest of a tar stream whose member names are relative to ``parent``."""
    out: Manifest = {}
    with tarfile.open(fileobj=io.BufferedReader(stream, 1 << 20), mode="r|") as tar:
        for m in tar:
            path = posixpath.normpath(posixpath.join(parent, m.name))
            if _excluded(path):
                continue
            out[path] = _entry(tar, m)
    return out


def _entry(tar: tarfile.TarFile, m: tarfile.TarInfo) -> Entry:
    owner = (m.mode, m.uid, m.gid)
    if m.isfile():
        h = hashlib.sha256()
        f = tar.extractfile(m)
        assert f is not None  # a regular member always has data
        while chunk := f.read(1 << 20):
            h.update(chunk)
        return Entry("file", *owner, m.size, h.hexdigest())
    if m.isdir():
        return Entry("dir", *owner)
    if m.issym() or m.islnk():
        return Entry("symlink" if m.issym() else "hardlink", *owner, 0, m.linkname)
    if m.ischr() or m.isblk():
        return Entry("device", *owner, 0, f"{m.devmajor}:{m.devminor}")
    return Entry("other", *owner)


def container_manifest(container, roots: tuple[str, ...]) -> Manifest:
    """Manifest of ``roots`` in a (created) container; a missing root is recorded as absent."""
    out: Manifest = {}
    for root in roots:
        try:
            chunks, _ = container.get_archive(root)
        except docker.errors.NotFound:
            out[root] = ABSENT
            continue
        out.update(manifest_of_tar(_ChunkReader(iter(chunks)), posixpath.dirname(root) or "/"))
    return out


def diff_manifests(a: Manifest, b: Manifest) -> tuple[str, ...]:
    return tuple(sorted(p for p in a.keys() | b.keys() if a.get(p) != b.get(p)))


def _describe(path: str, a: Manifest, b: Manifest) -> str:
    ea, eb = a.get(path, ABSENT), b.get(path, ABSENT)
    if ea.kind != eb.kind:
        return f"{path} ({ea.kind} in build 1, {eb.kind} in build 2)"
    parts = [
        "content differs" if f == "content" else f"{f} {getattr(ea, f)!r} vs {getattr(eb, f)!r}"
        for f in Entry._fields
        if getattr(ea, f) != getattr(eb, f)
    ]
    return f"{path} ({', '.join(parts)})"


def build_fresh(client: docker.DockerClient, context: str, timeout: float, limits: Limits | None = None) -> str:
    """Build ``context`` with the cache off; returns the image id. ``limits``: those of the
    task's builds (no network, its [environment] request capped by the default ``LimitCaps``);
    None reads them from the task.toml beside ``context`` (defaults where there is none)."""
    # Unique (never the base image) and owned: the reaper removes it if this process dies mid-build.
    labels = {MANAGED_LABEL: "1", "aes.reset": uuid.uuid4().hex, **owner_labels()}
    if limits is None:
        try:
            toml = (Path(context).parent / "task.toml").read_text(encoding="utf-8")
            limits = Limits.for_task(parse_task_toml(toml).environment)
        except (OSError, ValueError, BundleError):
            limits = Limits()
    return build_image(client, Path(context), timeout, limits=limits, nocache=True, labels=labels)


def _snapshot(client: docker.DockerClient, image: str, roots: tuple[str, ...]) -> Manifest:
    container = client.containers.create(image, command=["true"], network_disabled=True, labels=owner_labels())
    try:
        return container_manifest(container, roots)
    finally:
        container.remove(force=True)


async def check_reset(
    task: Task, images: ImageCache, extra_paths: tuple[str, ...] = (), labels: dict[str, str] | None = None
) -> ResetReport:
    """Build twice, snapshot twice, compare, then run the reference solution on the second
    build (its containers carry ``labels``)."""
    if not (task.environment_dir / "Dockerfile").is_file():
        return ResetReport(True, "not_applicable", "no environment/Dockerfile to rebuild (prebuilt image or compose)")
    client = images.client
    timeout = min(task.config.environment.build_timeout_sec, images.max_build_timeout)
    for image in base_images(task.environment_dir / "Dockerfile", images.kinds):
        await images.base_image(image)  # rebuilt without cache: the task's layers, on the domain's image
    built: list[str] = []
    try:
        for _ in range(2):
            try:
                built.append(await asyncio.to_thread(build_fresh, client, str(task.environment_dir), timeout))
            except BuildFailedError as e:
                return ResetReport(False, "build_failed", f"a rebuild without cache failed: {e}")
        report = await asyncio.to_thread(_compare, client, task, built, extra_paths)
        if not report.ok:
            return report
        if not task.has_solution:
            return dataclasses.replace(report, detail=f"{report.detail}; no reference solution (an imported task): "
                                                      "the oracle run on the rebuild is skipped")
        oracle = await run_trial(task, OracleAgent(task), images, image=built[1], labels=labels)
    finally:
        await asyncio.to_thread(_remove, client, built)
    if oracle.reward != 1.0:
        why = "solve.sh timed out" if oracle.agent.timed_out else oracle.error or f"reward {oracle.reward:g}"
        return dataclasses.replace(
            report, ok=False, reason="oracle_failed_after_reset", logs=oracle.log(),
            detail=f"the reference solution fails on a fresh rebuild ({why}); it must score 1.0 from the initial state",
        )
    return dataclasses.replace(report, detail=f"{report.detail}; the reference solution scores 1.0 on the rebuild")


def _compare(client: docker.DockerClient, task: Task, images: list[str], extra_paths: tuple[str, ...]) -> ResetReport:
    workdir = (client.images.get(images[0]).attrs.get("Config") or {}).get("WorkingDir") or ""  # imported images have none
    roots = task_roots(task, workdir, extra_paths)
    a, b = (_snapshot(client, image, roots) for image in images)
    differing = diff_manifests(a, b)
    if not differing:
        return ResetReport(True, "ok", f"{len(a)} paths identical under {', '.join(roots)}", roots=roots)
    shown = "; ".join(_describe(p, a, b) for p in differing[:MAX_REPORTED])
    more = f" and {len(differing) - MAX_REPORTED} more" if len(differing) > MAX_REPORTED else ""
    return ResetReport(
        False, "state_differs", f"the initial state differs between two builds: {shown}{more}",
        differing=differing, roots=roots,
    )


def _remove(client: docker.DockerClient, images: list[str]) -> None:
    for image in images:
        try:
            client.images.remove(image, force=True)
        except docker.errors.NotFound:
            pass
