"""``aes validate PATH...``: validate task directories (or .tar.gz bundles) and print a table.

``--imported`` treats them as human-written tasks from a Harbor dataset: a task that leaves its
network unset gets the one ``AES_IMPORTED_NETWORK`` gives imported tasks (``aes_lib.bundle.imported``).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from aes_cli.errors import CommandError
from aes_cli.output import Progress, print_json
from aes_lib.bundle import BundleError, unpack
from aes_lib.bundle.imported import ImportedNetwork, as_imported
from aes_lib.config import Settings
from aes_lib.domains.validation import validate_in_domain
from aes_lib.sandbox import ImageCache, ValidationReport
from aes_lib.sandbox.container import LimitCaps

STEPS = 5
"""Progress steps per task: image built, oracle run, nop run, tamper probe, the domain's gate (a
task whose domain has none, or that failed early, makes up the steps it skipped at its last line)."""


def _check(path: Path) -> None:
    """A path that is neither a task folder nor a file is a usage error, not a verdict
    (an archive that does not unpack is one: ``invalid_bundle``)."""
    if not path.exists():
        raise CommandError(f"{path}: no such task folder or bundle")
    if path.is_dir() and not (path / "task.toml").is_file():
        raise CommandError(f"{path}: not a task folder (no task.toml)")


async def _one(path: Path, images: ImageCache, sem: asyncio.Semaphore, progress: Progress,
               imported: ImportedNetwork | None = None) -> ValidationReport:
    seen = 0

    def step(line: str) -> None:
        nonlocal seen
        seen += 1
        progress.step(f"{path.name}: {line}")

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
                report = await validate_in_domain(root, images, caps=images.caps, progress=step)
    # A task that failed early skips its remaining steps.
    progress.step(f"{path.name}: {'pass' if report.ok else 'FAIL ' + report.reason}", advance=max(0, STEPS - seen))
    return report


async def validate_paths(paths: list[Path], jobs: int, progress: Progress,
                         imported: ImportedNetwork | None = None) -> list[ValidationReport]:
    """Reports of the task folders or bundles at ``paths``, ``jobs`` at a time; ``imported``:
    the network policy of imported tasks (None: they are treated as generated ones)."""
    import docker

    # Imported tasks may get the network their task.toml asks for, where the operator allows
    # it (AES_SANDBOX_NETWORK=imported); generated ones never.
    images = ImageCache(await asyncio.to_thread(docker.from_env), caps=LimitCaps(allow_network=imported is not None))
    sem = asyncio.Semaphore(max(1, jobs))
    return await asyncio.gather(*(_one(p, images, sem, progress, imported) for p in paths))


def render(reports: list[ValidationReport]) -> str:
    """A fixed-width table: task, verdict, reason, oracle, nop, seconds (and detail of failures)."""

    def fmt(x: float | None) -> str:
        return "-" if x is None else f"{x:.3g}"

    rows = [("TASK", "VERDICT", "REASON", "ORACLE", "NOP", "SECONDS")] + [
        (r.task, "pass" if r.ok else "NEEDS GPU" if r.reason == "needs_gpu" else "FAIL", r.reason, fmt(r.oracle_reward), fmt(r.nop_reward), f"{r.seconds:.1f}")
        for r in reports
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    failures = [f"  {r.task}: {r.detail}" for r in reports if not r.ok]
    return "\n".join(lines + ([""] + failures if failures else []) + warn_lines(reports))


def warn_lines(reports: list[ValidationReport]) -> list[str]:
    """``WARN task: ...`` per warning (fields kept but not applied), after a blank line."""
    warns = [f"WARN {r.task}: {w}" for r in reports for w in r.warnings]
    return [""] + warns if warns else []


def _run(args: argparse.Namespace) -> int:
    paths = [Path(p) for p in args.paths]
    for p in paths:
        _check(p)
    imported = Settings.from_env().imported_network if args.imported else None
    with Progress("validate", total=STEPS * len(paths)) as progress:
        reports = asyncio.run(validate_paths(paths, args.jobs, progress, imported))
    if args.json:
        print_json(reports)
    else:
        print(render(reports))
        if args.logs:
            for r in reports:
                if r.logs:
                    print(f"\n===== {r.task} ({r.reason})\n{r.logs}")
    return 0 if all(r.ok for r in reports) else 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="build each task and check oracle == 1.0, nop < 0.5 and its domain's rules")
    p.add_argument("paths", nargs="+", metavar="PATH", help="task directory or .tar.gz bundle")
    p.add_argument("-j", "--jobs", type=int, default=1, help="tasks validated at once (default 1)")
    p.add_argument("--logs", action="store_true", help="print the build/agent/verifier logs of failures")
    p.add_argument("--json", action="store_true",
                   help="print the reports (logs and warnings included) as one JSON array instead of the table")
    p.add_argument("--imported", action="store_true",
                   help="human-written tasks from a Harbor dataset: one that leaves its network unset gets "
                        "AES_IMPORTED_NETWORK's policy (off: none; harbor: Harbor's default, the network)")
    p.set_defaults(func=_run)
