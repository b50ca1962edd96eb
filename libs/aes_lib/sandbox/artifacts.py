"""Harbor's separate verifier mode: the tests run in a container of their own image, and the
agent's work reaches them only as artifacts.

What reaches the verifier: ``/logs/artifacts`` (Harbor's convention folder) and each path the
task's ``artifacts`` names, copied out of the agent's container after its turn and placed at
the same paths in the verifier's. The copy is the agent's bytes, so only regular files and
directories are kept, each below its own artifact path (no links, devices, or names that
climb out), with modes reduced to 0755/0644: nothing else of the agent's container is seen.
The verifier's image is chosen as Harbor does (``ImageCache.verifier_image``).
"""

from __future__ import annotations

import asyncio
import io
import posixpath
import tarfile
from collections.abc import Iterable
from pathlib import Path

from aes_lib.bundle import Task
from aes_lib.bundle.config import reserved_path
from aes_lib.sandbox.container import Sandbox, SandboxError, SandboxVerdict, dir_entry
from aes_lib.sandbox.verifier import add_tests

CONVENTION_DIR = "/logs/artifacts"
"""Where an agent leaves artifacts without the task naming them (Harbor's convention)."""
MAX_ARTIFACT_BYTES = 256 << 20
"""Most bytes of artifacts carried into the verifier's container."""


def artifact_paths(task: Task) -> list[str]:
    """Absolute container paths to carry: the convention folder, then each artifact's source
    (relative sources are taken below the container's workdir, as Harbor does) that is not a
    system or verifier path."""
    workdir = task.config.environment.workdir or "/"
    paths = [CONVENTION_DIR]
    for a in task.config.artifacts:
        source = a if isinstance(a, str) else a.source
        path = posixpath.normpath(posixpath.join(workdir, source))
        if not reserved_path(path):
            paths.append(path)
    return list(dict.fromkeys(paths))


async def collect(agent: Sandbox, paths: Iterable[str]) -> bytes:
    """One archive, to extract at /, of the safe entries of each path in ``agent`` (absent
    paths are skipped). No path is a system or verifier path but the convention folder
    (task.toml's check: ``aes_lib.bundle.config.RESERVED_PATHS``), so nothing lands on the
    verifier's toolchain, tests or reward files."""
    out = io.BytesIO()
    budget = MAX_ARTIFACT_BYTES
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in paths:
            raw = io.BytesIO()
            if not await agent.get_archive(path, raw, budget):
                continue
            budget -= raw.tell()
            raw.seek(0)
            try:
                await asyncio.to_thread(_keep_safe, raw, path, tar)
            except (tarfile.TarError, EOFError) as e:  # the agent's bytes: its failure, not ours
                raise SandboxVerdict(f"artifact {path}: unreadable archive: {e}") from e
    return out.getvalue()


def _keep_safe(raw: io.BytesIO, path: str, tar: tarfile.TarFile) -> None:
    """Copy into ``tar`` the regular files and directories of Docker's archive of ``path``
    (whose members are named from ``path``'s last component), renamed below ``path``."""
    parent = posixpath.dirname(path.rstrip("/")).lstrip("/")
    base = posixpath.basename(path.rstrip("/"))
    ancestors = _ancestors(parent)  # added before the first member kept
    with tarfile.open(fileobj=raw, mode="r|") as src:
        for m in src:
            name = posixpath.normpath(m.name)
            if name != base and not name.startswith(base + "/") or ".." in name.split("/"):
                continue
            if not (m.isreg() or m.isdir()):
                continue  # links, devices, fifos: never carried
            dest = posixpath.join(parent, name)
            for ancestor in ancestors:
                tar.addfile(dir_entry(ancestor))
            ancestors = []
            out = tarfile.TarInfo(dest)
            out.type = m.type
            out.mode = 0o755 if m.isdir() or m.mode & 0o100 else 0o644
            out.size = m.size if m.isreg() else 0
            tar.addfile(out, src.extractfile(m) if m.isreg() else None)


def _ancestors(path: str) -> list[str]:
    parts = [p for p in path.split("/") if p]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


async def place(verifier: Sandbox, artifacts: bytes, tests_dir: Path | None) -> None:
    """Put the artifacts, the tests (unless the image holds them: ``tests_dir`` None) and an
    empty /logs/verifier into the verifier's container."""
    r = await verifier.exec("rm -rf /logs/verifier && mkdir -p /logs/verifier", timeout=60, user=0)
    if r.exit_code != 0:
        raise SandboxError(f"cannot prepare /logs/verifier in the verifier's container: {r.output[-500:]}")
    if artifacts:
        await verifier.put_archive(io.BytesIO(artifacts))
    if tests_dir is not None:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
            add_tests(tar, tests_dir)
        buf.seek(0)
        await verifier.put_archive(buf)
