"""``aes run [--rounds N]`` (what ``make run`` does): the flywheel end to end on the embedded stack.

Brings the embedded stack up (nats-server, blob store, local model, every
service as a process; ``aes_ops.stack``), seeds the pool from ``seeds/``, runs N
rounds printing every stage outcome as it arrives on the bus -- each round's
admissions, then its training waves and the learner's updates -- then prints the
status summary. The stack stays up afterwards (``aes down`` stops it) so
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
from aes_ops.readout import snapshot
from aes_ops.rounds import BusFeed, run_rounds
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
        store = PoolStore(await bus.kv(BUCKET), config.pool_capacity)
        if not args.no_seed:
            events = await seed_pool(bus, store, seed_dirs(args.seeds))
            _say(f"seeded the pool with {len(events)} tasks from {args.seeds}")

        async def pool_size() -> int:
            return len((await store.index()).active)

        tally = LearnerTally()
        trackers = await run_rounds(
            bus, pool_size, rounds=args.rounds, fresh=args.assignments or config.assignments_per_round,
            review=args.review, round_timeout=args.round_timeout, out=_say,
            after_round=_training_phase(bus, settings, args.waves, tally), observe=tally.observe,
        )
        snap = await snapshot(bus, config)
    _say("\n== summary")
    _say(render(snap.status, len(snap.pool), snap.pool_by_category))
    return 0 if all(t.done for t in trackers) else 1


def _training_phase(bus, settings: Settings, waves: int | None, tally: LearnerTally):
    """After each round: its training waves, then one line of what the learner did in the
    round (``tally`` also saw the round's admissions: the proposer samples)."""
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
        tally.reset()

    return phase


async def training_only(settings: Settings, args: argparse.Namespace) -> int:
    async with await Bus.connect(settings, name="aes-train") as bus:
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
    p.add_argument("--waves", type=int, default=None,
                   help="training waves after each round (default AES_TRAINING_WAVES_PER_ROUND, 1; 0: no training)")
    p.set_defaults(func=_run)
    t = sub.add_parser("train", help="training waves on the current pool: rollouts, learner updates, engine reloads")
    t.add_argument("--waves", type=int, default=None, help="waves to run (default AES_TRAINING_WAVES_PER_ROUND, 1)")
    t.set_defaults(func=_train)
