"""``aes validate PATH...``: validate task directories (or .tar.gz bundles) and print a table.

``--imported`` treats them as human-written tasks from a Harbor dataset: a task that leaves its
network unset gets the one ``AES_IMPORTED_NETWORK`` gives imported tasks (``aes_lib.bundle.imported``).
"""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter
from pathlib import Path

from aes_cli.errors import CommandError
from aes_cli.output import Progress, print_json, table
from aes_lib.bundle.imported import ImportedNetwork, dataset_tasks
from aes_lib.bundle.precheck import Precheck, precheck
from aes_lib.config import Settings
from aes_lib.sandbox import ValidationReport
from aes_ops.seeding import check_dataset, write_report
from aes_ops.validation import STEPS, validate_paths


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
    text = table(("TASK", "VERDICT", "WHY"), [(c.task or c.path, c.verdict, c.detail) for c in checks])
    counts = Counter(c.verdict for c in checks)
    summary = ", ".join(f"{counts[v]} {v}" for v in ("build", "no_reference", "unsupported", "load_error") if counts[v])
    digests = [c.digest for c in checks if c.would_build and c.digest]
    dupes = len(digests) - len(set(digests))
    return text + f"\n\n{len(checks)} tasks: {summary}" + (
        f"; {dupes} identical to another (validated once)" if dupes else "")


def render(reports: list[ValidationReport]) -> str:
    """A table: task, verdict, reason, oracle, nop, seconds (and detail of failures)."""

    def fmt(x: float | None) -> str:
        return "-" if x is None else f"{x:.3g}"

    lines = [table(("TASK", "VERDICT", "REASON", "ORACLE", "NOP", "SECONDS"), [
        (r.task, ("pass (no reference)" if r.no_reference else "pass") if r.ok
         else "NEEDS GPU" if r.reason == "needs_gpu" else "FAIL",
         r.reason, fmt(r.oracle_reward), fmt(r.nop_reward), f"{r.seconds:.1f}")
        for r in reports])]
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
    network: ImportedNetwork = Settings.from_env().imported_network if args.imported else "off"
    count = len(dataset_tasks(root).dirs)
    with Progress("validate", total=STEPS * count) as progress:
        tasks, skipped = asyncio.run(check_dataset(
            root, allow_network=args.imported, network=network, jobs=args.jobs, journal=args.journal,
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
        reports = asyncio.run(validate_paths(paths, args.jobs, progress.step, imported))
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
