"""``aes run [--rounds N]`` (what ``make run`` does): the flywheel end to end on the embedded stack.

Brings the embedded stack up (nats-server, blob store, local model, every
service as a process; ``aes_ops.stack``), validates the seed tasks and seeds the
pool with the valid ones (``--through-gates SEED`` sends one through every
admission stage instead), runs N rounds printing every stage outcome as it
arrives on the bus -- each round's admissions, then its training waves and the
learner's updates -- then prints the status summary, what the model could not
do, and writes ``$AES_HOME/report.html``. The stack stays up afterwards (``aes down`` stops it) so
``aes status`` and ``aes report`` can read the results. ``aes train`` runs only
training waves on the current pool.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from aes_lib.bus import Bus
from aes_lib.config import Settings
from aes_lib.flywheel.config import FlywheelConfig
from aes_lib.flywheel.runners.pool_store import BUCKET, PoolStore
from aes_ops import demo, report
from aes_ops.readout import snapshot
from aes_ops.rounds import BusFeed, run_rounds
from aes_ops.runrecord import CONFIG_NAME, record_run
from aes_ops.seeding import SEEDS_DIR, seed_dirs, seed_pool
from aes_lib.flywheel.status import render
from aes_lib.flywheel.training import TrainingConfig
from aes_ops.waves import LearnerTally, train
from aes_lib.models.weights import StaticEngineError, engine_client


def _say(line: str) -> None:
    print(line, flush=True)


async def flywheel(settings: Settings, args: argparse.Namespace) -> int:
    config = FlywheelConfig.from_env()
    async with await Bus.connect(settings, name="aes-run") as bus:
        run = await record_run(bus, settings.home, "run")
        _say(f"run {run.run_id}: configuration in {settings.home / CONFIG_NAME}")
        store = PoolStore(await bus.kv(BUCKET), config.pool_capacity)
        dirs = [] if args.no_seed else seed_dirs(args.seeds)
        if dirs and not args.no_validate:
            _say(f"== validating {len(dirs)} seed tasks (build, reference solution = 1, empty solution < 0.5)")
            reports = await demo.validate_seeds(dirs, _say)
            dirs = [d for d, r in zip(dirs, reports) if r.ok]
        shown = next((d for d in dirs if d.name == args.through_gates), None)
        if args.through_gates and shown is None:
            _say(f"no valid seed named {args.through_gates!r} to send through the gates")
        dirs = [d for d in dirs if d is not shown]
        if dirs:
            events = await seed_pool(bus, store, dirs)
            _say(f"seeded the pool with {len(events)} tasks from {args.seeds}")
        if shown is not None:
            _say(f"== seed {shown.name} through every admission stage ({settings.route})")
            candidate = await asyncio.to_thread(demo.seed_candidate, shown, bus.blobs, settings.route_stages)
            await demo.through_gates(bus, candidate, args.round_timeout, _say)

        async def pool_size() -> int:
            return len((await store.index()).active)

        tally = LearnerTally()
        solver_rewards: list[float] = []
        trackers = await run_rounds(
            bus, pool_size, rounds=args.rounds, fresh=args.assignments or config.assignments_per_round,
            review=args.review, round_timeout=args.round_timeout, out=_say,
            after_round=_training_phase(bus, settings, args.waves, tally, solver_rewards), observe=tally.observe,
        )
        snap = await snapshot(bus, config)
        report_path = settings.home / "report.html"
        await report.write(bus, config, report_path, snap)
    _say("\n== summary")
    _say(render(snap.status, len(snap.pool), snap.pool_by_category))
    rounds = {t.round for t in trackers}
    proposed = [r for r in snap.results if r.lineage.round in rounds and r.lineage.mode != "seed"]
    for line in demo.shortcomings(model=settings.model, proposer=proposed, solver_rewards=solver_rewards,
                                  trained=tally.updates > 0 or args.waves == 0):
        _say(f"note: {line}")
    _say(f"report: {report_path}")
    return 0 if all(t.done for t in trackers) else 1


def _training_phase(bus, settings: Settings, waves: int | None, tally: LearnerTally,
                    solver_rewards: list[float] | None = None):
    """After each round: its training waves, then one line of what the learner did in the
    round (``tally`` also saw the round's admissions: the proposer samples). The solver's
    training rewards are added to ``solver_rewards`` before the tally is reset."""
    try:
        engine = engine_client(settings.engine, settings.model_url)
    except StaticEngineError as e:
        _say(f"no training: {e}")
        return None
    config = TrainingConfig.from_env(**({} if waves is None else {"waves_per_round": waves}))

    async def phase(round_: int, feed: BusFeed | None = None, prefix: str = "") -> None:
        if config.waves_per_round:
            await train(bus, config, round_=round_, prefix=prefix or f"r{round_}", served_version=engine.version,
                        out=_say, tally=tally, feed=feed)
        _say(f"== round {round_} {tally.line()}")
        if solver_rewards is not None:
            solver_rewards.extend(tally.samples.get("solver", []))
        tally.reset()

    return phase


async def training_only(settings: Settings, args: argparse.Namespace) -> int:
    async with await Bus.connect(settings, name="aes-train") as bus:
        run = await record_run(bus, settings.home, "train")
        _say(f"run {run.run_id}: configuration in {settings.home / CONFIG_NAME}")
        store = PoolStore(await bus.kv(BUCKET), FlywheelConfig.from_env().pool_capacity)
        if not (await store.index()).active:
            print("the pool is empty: seed it first (aes pool seed, or aes run)", file=sys.stderr)
            return 1
        phase = _training_phase(bus, settings, args.waves, LearnerTally())
        if phase is None:
            return 1
        await phase(0, prefix=f"t{time.strftime('%Y%m%d%H%M%S')}")
    return 0


def _train(args: argparse.Namespace) -> int:
    from aes_ops import stack

    settings = stack.up(Settings.from_env())
    return asyncio.run(training_only(settings, args))


def _run(args: argparse.Namespace) -> int:
    from aes_ops import stack

    settings = stack.up(Settings.from_env())
    _say(f"stack up: NATS {settings.nats_url}, blobs {settings.blob_location}, model {settings.model_url}; logs in {settings.home / 'logs'}")
    try:
        return asyncio.run(flywheel(settings, args))
    except KeyboardInterrupt:
        print("interrupted; the stack stays up (aes down stops it)", file=sys.stderr)
        return 130


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="start the embedded stack, seed the pool, run N flywheel rounds")
    p.add_argument("--rounds", type=int, default=1, help="flywheel rounds to run (default 1)")
    p.add_argument("--assignments", type=int, default=0,
                   help="new assignments per round (default AES_ASSIGNMENTS_PER_ROUND, 4)")
    p.add_argument("--review", action="store_true", help="rerun the solver on the pool before each round's plan")
    p.add_argument("--round-timeout", type=float, default=1800.0, help="seconds before a round is reported as stuck")
    p.add_argument("--seeds", default=SEEDS_DIR, type=Path, help="seed task folder")
    p.add_argument("--no-seed", action="store_true", help="do not (re)load the seed tasks")
    p.add_argument("--no-validate", action="store_true", help="seed without validating the seed tasks first")
    p.add_argument("--through-gates", metavar="SEED", default="",
                   help="send this seed through every admission stage as a candidate instead of seeding it")
    p.add_argument("--waves", type=int, default=None,
                   help="training waves after each round (default AES_TRAINING_WAVES_PER_ROUND, 1; 0: no training)")
    p.set_defaults(func=_run)
    t = sub.add_parser("train", help="training waves on the current pool: rollouts, learner updates, engine reloads")
    t.add_argument("--waves", type=int, default=None, help="waves to run (default AES_TRAINING_WAVES_PER_ROUND, 1)")
    t.set_defaults(func=_train)
