"""``aes validate PATH...``: validate task directories (or .tar.gz bundles) and print a table.

``--imported`` treats them as human-written tasks from a Harbor dataset: a task that leaves its
network unset gets the one ``AES_IMPORTED_NETWORK`` gives imported tasks (``aes_lib.bundle.imported``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from collections import Counter
from pathlib import Path

from aes_cli.errors import CommandError
from aes_cli.output import Progress, print_json
from aes_lib.bundle import BundleError, unpack
from aes_lib.bundle.imported import ImportedNetwork, as_imported, dataset_tasks
from aes_lib.bundle.precheck import Precheck, precheck
from aes_lib.config import Settings
from aes_lib.domains.validation import validate_in_domain
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import ImageCache, ValidationReport
from aes_lib.sandbox.container import LimitCaps

STEPS = 5
"""Progress steps per task: image built, oracle run, nop run, tamper probe, the domain's gate (a
task whose domain has none, or that failed early, makes up the steps it skipped at its last line)."""


def _expand(path: Path) -> list[Path]:
    """The task folders or bundles ``path`` names: itself, or a dataset folder's tasks. A path
    that is none of these is a usage error, not a verdict (an archive that does not unpack is
    one: ``invalid_bundle``)."""
    if not path.exists():
        raise CommandError(f"{path}: no such task folder or bundle")
    if path.is_dir() and not (path / "task.toml").is_file():
        found = dataset_tasks(path).dirs
        if not found:
            raise CommandError(f"{path}: not a task folder (no task.toml) nor a dataset of task folders")
        return found
    return [path]


def render_precheck(checks: list[Precheck]) -> str:
    """A table of what would be built, what is unsupported and why, what does not load; then counts."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table("TASK", "VERDICT", "WHY", box=None, pad_edge=False)
    for c in checks:
        table.add_row(Text(c.task or c.path), c.verdict, Text(c.detail))  # Text: no markup from task files
    console = Console(width=200, record=True, file=open(os.devnull, "w"))
    console.print(table)
    counts = Counter(c.verdict for c in checks)
    summary = ", ".join(f"{counts[v]} {v}" for v in ("build", "no_reference", "unsupported", "load_error") if counts[v])
    digests = [c.digest for c in checks if c.would_build and c.digest]
    dupes = len(digests) - len(set(digests))
    text = "\n".join(line.rstrip() for line in console.export_text().splitlines())
    return text + f"\n\n{len(checks)} tasks: {summary}" + (
        f"; {dupes} identical to another (validated once)" if dupes else "")


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
                report = await validate_in_domain(root, images, caps=images.caps, progress=step,
                                                  require_reference=imported is None)
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
    images = ImageCache(await asyncio.to_thread(docker.from_env), caps=LimitCaps(allow_network=imported is not None),
                        kinds=DomainKinds())
    sem = asyncio.Semaphore(max(1, jobs))
    return await asyncio.gather(*(_one(p, images, sem, progress, imported) for p in paths))


def render(reports: list[ValidationReport]) -> str:
    """A fixed-width table: task, verdict, reason, oracle, nop, seconds (and detail of failures)."""

    def fmt(x: float | None) -> str:
        return "-" if x is None else f"{x:.3g}"

    rows = [("TASK", "VERDICT", "REASON", "ORACLE", "NOP", "SECONDS")] + [
        (r.task, ("pass (no reference)" if r.no_reference else "pass") if r.ok else "NEEDS GPU" if r.reason == "needs_gpu" else "FAIL", r.reason, fmt(r.oracle_reward), fmt(r.nop_reward), f"{r.seconds:.1f}")
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


def _precheck(paths: list[Path], as_json: bool) -> int:
    checks = [precheck(p) for p in paths]
    if as_json:
        print_json(checks)
    else:
        print(render_precheck(checks))
    return 0 if all(c.would_build for c in checks) else 1


def _run_dataset(args: argparse.Namespace, root: Path) -> int:
    """A dataset folder: every task pre-checked (the table first), then validated ``--jobs`` at
    a time, each content digest once, resuming from ``--journal``; ``--report`` gets the JSON."""
    import docker

    from aes_ops.seeding import validate_dataset, write_report

    network: ImportedNetwork = Settings.from_env().imported_network if args.imported else "off"
    count = len(dataset_tasks(root).dirs)
    with tempfile.TemporaryDirectory(prefix="aes-validate-") as scratch:
        with Progress("validate", total=STEPS * count) as progress:
            images = ImageCache(docker.from_env(), caps=LimitCaps(allow_network=args.imported), kinds=DomainKinds())
            tasks, skipped = asyncio.run(validate_dataset(
                root, images, Path(scratch), jobs=args.jobs, network=network, journal=args.journal,
                require_reference=not args.imported,
                progress=lambda src, line: progress.step(f"{src.name}: {line}"),
                checked=None if args.json else lambda checks: print(render_precheck(checks) + "\n", flush=True)))
    if args.report:
        write_report(tasks, skipped, args.report)
    reports = [t.report for t in tasks]
    if args.json:
        print_json(reports)
    else:
        print(render(reports))
        resumed = sum(t.how == "resumed" for t in tasks)
        dupes = sum(t.how == "duplicate" for t in tasks)
        if resumed or dupes:
            print(f"\n{resumed} resumed from {args.journal}, {dupes} identical to another task (validated once)")
    return 0 if all(r.ok for r in reports) else 1


def _run(args: argparse.Namespace) -> int:
    datasets = [Path(a) for a in args.paths if Path(a).is_dir() and not (Path(a) / "task.toml").is_file()]
    paths = [p for arg in args.paths for p in _expand(Path(arg))]
    if args.precheck:
        return _precheck(paths, args.json)
    if datasets:
        if len(args.paths) != 1:
            raise CommandError("a dataset folder is validated on its own: give it as the only PATH")
        return _run_dataset(args, datasets[0])
    if args.journal or args.report:
        raise CommandError("--journal and --report apply to a dataset folder")
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
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="task directory, .tar.gz bundle, or a dataset folder (its task folders one level down)")
    p.add_argument("--journal", type=Path, metavar="FILE",
                   help="with a dataset folder: record each finished task here; a rerun skips them")
    p.add_argument("--report", type=Path, metavar="FILE", help="with a dataset folder: write every verdict as JSON")
    p.add_argument("--precheck", action="store_true",
                   help="only load and pre-check (no build): would build, no_reference, unsupported and why, or the "
                        "load error; exit 1 if any task would not build")
    p.add_argument("-j", "--jobs", type=int, default=1, help="tasks validated at once (default 1)")
    p.add_argument("--logs", action="store_true", help="print the build/agent/verifier logs of failures")
    p.add_argument("--json", action="store_true",
                   help="print the reports (logs and warnings included) as one JSON array instead of the table")
    p.add_argument("--imported", action="store_true",
                   help="human-written tasks from a Harbor dataset: one that leaves its network unset gets "
                        "AES_IMPORTED_NETWORK's policy (off: none; harbor: Harbor's default, the network)")
    p.set_defaults(func=_run)
