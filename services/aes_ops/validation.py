"""``aes validate`` as functions: task folders or bundles validated as the validator would
(build, reference solution, empty solution, tamper probe, the domain's gate), ``jobs`` at a time."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from aes_lib.bundle import BundleError, unpack
from aes_lib.bundle.imported import ImportedNetwork, as_imported
from aes_lib.domains.validation import validate_in_domain
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import ImageCache, ValidationReport
from aes_lib.sandbox.container import LimitCaps

STEPS = 6
"""Progress steps per task: image built, oracle run, nop run, leak scan, tamper probe, the domain's gate (a
task whose domain has none, or that failed early, makes up the steps it skipped at its last line)."""

Step = Callable[[str, int], None]
"""A progress callback: (what happened, steps it completes)."""


async def image_cache(allow_network: bool) -> ImageCache:
    """The local Docker engine's image cache. Imported tasks may get the network their task.toml
    asks for, where the operator allows it (AES_SANDBOX_NETWORK=imported); generated ones never."""
    import docker

    return ImageCache(await asyncio.to_thread(docker.from_env), caps=LimitCaps(allow_network=allow_network),
                      kinds=DomainKinds())


async def _one(path: Path, images: ImageCache, sem: asyncio.Semaphore, step: Step,
               imported: ImportedNetwork | None = None) -> ValidationReport:
    seen = 0

    def said(line: str) -> None:
        nonlocal seen
        seen += 1
        step(f"{path.name}: {line}", 1)

    async with sem:
        with tempfile.TemporaryDirectory(prefix="aes-validate-") as tmp:
            root: Path | None = path
            if path.is_file():  # an archive: unpack it defensively first
                try:
                    root = (await asyncio.to_thread(unpack, path, Path(tmp) / "task")).root
                except BundleError as e:
                    root = None
                    report = ValidationReport(task=str(path), ok=False, reason="invalid_bundle",
                                              detail=f"{type(e).__name__}: {e}")
            if root is not None:
                if imported is not None:
                    root = await asyncio.to_thread(as_imported, root, Path(tmp) / "imported", imported)
                report = await validate_in_domain(root, images, caps=images.caps, progress=said,
                                                  require_reference=imported is None)
    # A task that failed early skips its remaining steps.
    step(f"{path.name}: {'pass' if report.ok else 'FAIL ' + report.reason}", max(0, STEPS - seen))
    return report


async def validate_paths(paths: Sequence[Path], jobs: int, step: Step,
                         imported: ImportedNetwork | None = None) -> list[ValidationReport]:
    """Reports of the task folders or bundles at ``paths``, ``jobs`` at a time; ``imported``:
    the network policy of imported tasks (None: they are treated as generated ones)."""
    images = await image_cache(allow_network=imported is not None)
    sem = asyncio.Semaphore(max(1, jobs))
    return await asyncio.gather(*(_one(p, images, sem, step, imported) for p in paths))
