"""``aes pool seed|list|review|export``: the active pool of environments."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from aes_cli.commands.domains import domain_arg
from aes_cli.commands.validate import render_precheck, warn_lines
from aes_cli.errors import CommandError
from aes_cli.output import Progress, table
from aes_lib.bundle.imported import dataset_tasks
from aes_lib.config import Settings
from aes_lib.domains import get as get_domain
from aes_ops import seeding
from aes_ops.connect import with_pool
from aes_ops.seeding import SEEDS_DIR, ImportedTask, seed_dirs
from aes_ops.validation import STEPS


def _seed(args: argparse.Namespace) -> int:
    if args.source is not None:
        return _seed_from(args)
    folders = [get_domain(d).seeds for d in args.domain] if args.domain else [seed_dirs(args.seeds)]
    dirs = [d for group in folders for d in group]
    source = ", ".join(f"domain {d}" for d in args.domain) if args.domain else str(args.seeds)

    async def go(bus, store):
        events = await seeding.seed_pool(bus, store, dirs)
        idx = await store.index()
        print(f"seeded {len(events)} tasks from {source}; pool has {len(idx.active)}")
    asyncio.run(with_pool("aes-cli", go))
    return 0


def _seed_from(args: argparse.Namespace) -> int:
    """Validate every task of a Harbor dataset, print a table, seed the valid ones; 1 if any failed."""
    root: Path = args.source
    if not root.is_dir():
        raise CommandError(f"{root}: no such dataset folder")
    settings = Settings.from_env()
    try:
        count = len(dataset_tasks(root).dirs)
    except (OSError, ValueError) as e:
        raise CommandError(f"{root}: cannot read the dataset: {e}") from e
    if not count:
        raise CommandError(f"{root}: no task folders (with task.toml) in it or one level down")
    with Progress("import", total=STEPS * count) as progress:
        done = asyncio.run(seeding.import_dataset(
            settings, root, jobs=args.jobs, journal=args.journal, allow_forgeable=args.allow_forgeable,
            report=args.report, progress=lambda src, line: progress.step(f"{src.name}: {line}"),
            checked=lambda checks: print(render_precheck(checks) + "\n", flush=True)))
    tasks = done.tasks
    print(render_import(tasks, done.skipped))
    if done.pool is None:
        print(f"seeded 0 of {len(tasks)} tasks from {root}: none is valid")
    else:
        print(f"seeded {done.seeded} of {len(tasks)} tasks from {root} (network of imported tasks: "
              f"{settings.imported_network}); pool has {done.pool}")
        if done.sent:
            print(f"sent {done.sent} tasks without a reference solution to the calibrator: admitted (marked "
                  "no_reference) if some solver attempt passes, else unverified_too_hard")
    return 0 if all(t.report.ok for t in tasks) else 1


def render_import(tasks: list[ImportedTask], skipped: list[str]) -> str:
    """TASK, VERDICT, REASON, WARNINGS per task; then failures' details, warnings, skipped entries."""
    lines = [table(("TASK", "VERDICT", "REASON", "WARNINGS"), [
        (t.report.task, ("no_reference" if t.report.no_reference else "valid") if t.report.ok
         else "NEEDS GPU" if t.report.reason == "needs_gpu"
         else "FORGEABLE" if t.report.reason == "verifier_forgeable" else "FAIL",
         t.report.reason, str(len(t.report.warnings))) for t in tasks])]
    failures = [f"  {t.report.task}: {t.report.detail}" for t in tasks if not t.report.ok]
    lines += [""] + failures if failures else []
    lines += warn_lines([t.report for t in tasks])
    lines += [""] + [f"SKIPPED {s}" for s in skipped] if skipped else []
    return "\n".join(lines)


def _list(args: argparse.Namespace) -> int:
    async def go(bus, store):
        print(table(("ENV", "SOURCE", "DOMAIN", "CATEGORY", "MEAN", "TASK", "FLAGS"), [
            (e.env_id[:16], e.source, e.domain or "terminal", e.category or "-",
             "-" if e.mean_reward is None else f"{e.mean_reward:.2f}", e.name,
             " ".join(["no_reference"] * e.no_reference + ["FORGEABLE (left out of training)"] * bool(e.forgeable)))
            for e in await store.active_entries()]))
    asyncio.run(with_pool("aes-cli", go))
    return 0


def _review(args: argparse.Namespace) -> int:
    key = asyncio.run(with_pool("aes-cli", lambda bus, _: seeding.request_review(
        bus, round_=args.round, fresh=args.fresh, rerun=not args.no_rerun)))
    print(f"requested {key}")
    return 0


def _export(args: argparse.Namespace) -> int:
    async def go(bus, store):
        entries = await store.active_entries()
        manifest = await asyncio.to_thread(seeding.export, entries, bus.blobs, args.dir, args.name)
        print(f"exported {len(entries)} tasks to {args.dir} (Harbor dataset {args.name}: {manifest}); "
              f"run them with: harbor run -p {args.dir} -a oracle")
    asyncio.run(with_pool("aes-cli", go))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pool", help="the active pool of environments")
    ps = p.add_subparsers(dest="pool_command", required=True)
    s = ps.add_parser("seed", help="load the bundled seed tasks into the blob store and the pool")
    s.add_argument("--seeds", type=Path, default=SEEDS_DIR, help="folder of Harbor task directories")
    s.add_argument("--domain", action="append", type=domain_arg, default=[],
                   help="seed with this domain's seed tasks instead (repeatable; see aes domains): the planner's "
                        "assignments from them ask for tasks of the same domain")
    s.add_argument("--from", dest="source", type=Path, metavar="DIR",
                   help="a Harbor dataset folder (task folders one level down, or one task folder): validate "
                        "every task, print a table, seed the valid ones; exit 1 if any failed. A task that "
                        "leaves its network unset gets AES_IMPORTED_NETWORK's policy")
    s.add_argument("--allow-forgeable", action="store_true",
                   help="with --from: seed tasks the tamper probe found forgeable too, flagged in the pool "
                        "(training leaves them out unless AES_TRAINING_ALLOW_FORGEABLE=1)")
    s.add_argument("-j", "--jobs", type=int, default=1, help="with --from: tasks validated at once (default 1)")
    s.add_argument("--journal", type=Path, metavar="FILE",
                   help="with --from: record each finished task here; a rerun after an interruption skips them")
    s.add_argument("--report", type=Path, metavar="FILE", help="with --from: write every task's verdict as JSON")
    s.set_defaults(func=_seed)
    ps.add_parser("list", help="active environments").set_defaults(func=_list)
    r = ps.add_parser("review", help="rerun the solver on the pool, retire out-of-band tasks, plan replacements")
    r.add_argument("--round", type=int, default=0, help="round number for the planned assignments' ids")
    r.add_argument("--fresh", type=int, default=0, help="new assignments to plan besides replacements")
    r.add_argument("--no-rerun", action="store_true", help="plan only, without rerunning the solver")
    r.set_defaults(func=_review)
    e = ps.add_parser("export", help="write the pool as a Harbor dataset (task folders + dataset.toml)")
    e.add_argument("dir", type=Path)
    e.add_argument("--name", default="aes/pool", help="the dataset's org/name in dataset.toml (default aes/pool)")
    e.set_defaults(func=_export)
