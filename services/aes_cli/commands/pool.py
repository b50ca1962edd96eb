"""``aes pool seed|list|review|export``: the active pool of environments."""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import uuid
from pathlib import Path

from aes_proto import subjects
from aes_proto.messages import PoolPlan, PoolReview

from aes_cli.commands.domains import domain_arg
from aes_cli.commands.validate import warn_lines
from aes_cli.errors import CommandError
from aes_cli.output import Progress
from aes_lib.bundle.imported import dataset_tasks
from aes_lib.bus import Bus
from aes_lib.config import Settings
from aes_lib.domains import get as get_domain
from aes_lib.flywheel.config import FlywheelConfig
from aes_lib.flywheel.runners.pool_store import BUCKET, PoolStore
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import ImageCache
from aes_lib.sandbox.container import LimitCaps
from aes_ops.seeding import (SEEDS_DIR, ImportedTask, export, seed_dirs, seed_pool, send_to_calibration,
                             validate_dataset, write_report)


async def _with_bus(fn):
    config = FlywheelConfig.from_env()
    async with await Bus.connect(Settings.from_env(), name="aes-cli") as bus:
        return await fn(bus, PoolStore(await bus.kv(BUCKET), config.pool_capacity))


def _seed(args: argparse.Namespace) -> int:
    if args.source is not None:
        return _seed_from(args)
    folders = [get_domain(d).seeds for d in args.domain] if args.domain else [seed_dirs(args.seeds)]
    dirs = [d for group in folders for d in group]
    source = ", ".join(f"domain {d}" for d in args.domain) if args.domain else str(args.seeds)

    async def go(bus, store):
        events = await seed_pool(bus, store, dirs)
        idx = await store.index()
        print(f"seeded {len(events)} tasks from {source}; pool has {len(idx.active)}")
    asyncio.run(_with_bus(go))
    return 0


def _seed_from(args: argparse.Namespace) -> int:
    """Validate every task of a Harbor dataset, print a table, seed the valid ones; 1 if any failed."""
    import docker

    from aes_cli.commands.validate import STEPS, render_precheck

    root: Path = args.source
    if not root.is_dir():
        raise CommandError(f"{root}: no such dataset folder")
    network = Settings.from_env().imported_network
    try:
        count = len(dataset_tasks(root).dirs)
    except (OSError, ValueError) as e:
        raise CommandError(f"{root}: cannot read the dataset: {e}") from e
    if not count:
        raise CommandError(f"{root}: no task folders (with task.toml) in it or one level down")
    with tempfile.TemporaryDirectory(prefix="aes-import-") as scratch:
        with Progress("import", total=STEPS * count) as progress:
            # Imported tasks: the network their task.toml asks for where the operator allows it.
            images = ImageCache(docker.from_env(), caps=LimitCaps(allow_network=True), kinds=DomainKinds())
            tasks, skipped = asyncio.run(validate_dataset(
                root, images, Path(scratch), jobs=args.jobs, network=network,
                progress=lambda src, line: progress.step(f"{src.name}: {line}"), journal=args.journal,
                checked=lambda checks: print(render_precheck(checks) + "\n", flush=True)))
        print(render_import(tasks, skipped))
        if args.report:
            write_report(tasks, skipped, args.report)
        kept = [t for t in tasks if t.report.ok and t.how != "duplicate"]
        # A forgeable task is seeded only when the operator allows it, flagged in the pool (and
        # so left out of training waves unless AES_TRAINING_ALLOW_FORGEABLE=1).
        forgeable = {t.folder: t.report.detail for t in tasks if args.allow_forgeable and t.how != "duplicate"
                     and t.report.reason == "verifier_forgeable"}
        valid = [t.folder for t in kept if not t.report.no_reference] + list(forgeable)
        unverified = [t.folder for t in kept if t.report.no_reference]

        async def go(bus, store):
            events = await seed_pool(bus, store, valid, forgeable)
            sent = await send_to_calibration(bus, unverified)
            idx = await store.index()
            print(f"seeded {len(events)} of {len(tasks)} tasks from {root} (network of imported tasks: {network}); "
                  f"pool has {len(idx.active)}")
            if sent:
                print(f"sent {len(sent)} tasks without a reference solution to the calibrator: admitted (marked "
                      "no_reference) if some solver attempt passes, else unverified_too_hard")
        if valid or unverified:
            asyncio.run(_with_bus(go))
        else:
            print(f"seeded 0 of {len(tasks)} tasks from {root}: none is valid")
    return 0 if all(t.report.ok for t in tasks) else 1


def render_import(tasks: list[ImportedTask], skipped: list[str]) -> str:
    """TASK, VERDICT, REASON, WARNINGS per task; then failures' details, warnings, skipped entries."""
    rows = [("TASK", "VERDICT", "REASON", "WARNINGS")] + [
        (t.report.task, ("no_reference" if t.report.no_reference else "valid") if t.report.ok
         else "NEEDS GPU" if t.report.reason == "needs_gpu"
         else "FORGEABLE" if t.report.reason == "verifier_forgeable" else "FAIL",
         t.report.reason, str(len(t.report.warnings))) for t in tasks]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    failures = [f"  {t.report.task}: {t.report.detail}" for t in tasks if not t.report.ok]
    lines += [""] + failures if failures else []
    lines += warn_lines([t.report for t in tasks])
    lines += [""] + [f"SKIPPED {s}" for s in skipped] if skipped else []
    return "\n".join(lines)


def _list(args: argparse.Namespace) -> int:
    async def go(bus, store):
        for e in await store.active_entries():
            mean = "-" if e.mean_reward is None else f"{e.mean_reward:.2f}"
            print(f"{e.env_id[:16]}  {e.source:<11} {e.domain or 'terminal':<12} {e.category or '-':<18} "
                  f"mean {mean:<5} {e.name}{'  no_reference' if e.no_reference else ''}"
                  + ("  FORGEABLE (left out of training)" if e.forgeable else ""))
    asyncio.run(_with_bus(go))
    return 0


def _review(args: argparse.Namespace) -> int:
    async def go(bus, store):
        key = f"review:manual:{uuid.uuid4().hex[:12]}"
        if args.no_rerun:  # plan only
            await bus.publish(subjects.POOL_PLAN, PoolPlan(idempotency_key=key, episode_id=key, round=args.round,
                                                           fresh=args.fresh))
        else:
            await bus.publish(subjects.POOL_REVIEW, PoolReview(idempotency_key=key, episode_id=key, round=args.round,
                                                               fresh=args.fresh))
        print(f"requested {key}")
    asyncio.run(_with_bus(go))
    return 0


def _export(args: argparse.Namespace) -> int:
    async def go(bus, store):
        entries = await store.active_entries()
        manifest = await asyncio.to_thread(export, entries, bus.blobs, args.dir, args.name)
        print(f"exported {len(entries)} tasks to {args.dir} (Harbor dataset {args.name}: {manifest}); "
              f"run them with: harbor run -p {args.dir} -a oracle")
    asyncio.run(_with_bus(go))
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
