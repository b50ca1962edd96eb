"""``aes run`` and ``aes train`` as functions on a running stack: the flywheel end to end (seeds
validated and pooled, N rounds each followed by its training waves, the summary and the report),
or only training waves on the current pool. Every line goes to ``out``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from aes_lib.bus import Bus
from aes_lib.config import Settings
from aes_lib.flywheel.config import FlywheelConfig
from aes_lib.runners.pool_store import BUCKET, PoolStore
from aes_lib.flywheel.status import render
from aes_lib.flywheel.training import TrainingConfig
from aes_lib.models.weights import StaticEngineError, engine_client
from aes_ops import demo, report
from aes_ops.readout import snapshot
from aes_ops.rounds import BusFeed, run_rounds
from aes_ops.runrecord import CONFIG_NAME, record_run
from aes_ops.seeding import SEEDS_DIR, seed_dirs, seed_pool
from aes_ops.waves import LearnerTally, train

Out = Callable[[str], None]
Phase = Callable[..., Awaitable[None]]


class EmptyPoolError(RuntimeError):
    """Training waves asked for while the pool holds no task."""


@dataclass(frozen=True)
class RunOptions:
    """What ``aes run`` takes besides the settings."""

    rounds: int = 1
    assignments: int = 0
    """New assignments per round; 0: ``FlywheelConfig.assignments_per_round``."""
    review: bool = False
    round_timeout: float = 1800.0
    seeds: Path = SEEDS_DIR
    seed: bool = True
    validate: bool = True
    """Validate the seeds before they enter the pool."""
    through_gates: str = ""
    """A seed sent through every admission stage as a candidate instead of seeded."""
    waves: int | None = None
    """Training waves per round; None: ``TrainingConfig``'s."""


async def flywheel(settings: Settings, opts: RunOptions, out: Out) -> bool:
    """The whole run; True when every round finished (none stuck past its timeout)."""
    config = FlywheelConfig.from_env()
    async with await Bus.connect(settings, name="aes-run") as bus:
        run = await record_run(bus, settings.home, "run")
        out(f"run {run.run_id}: configuration in {settings.home / CONFIG_NAME}")
        store = PoolStore(await bus.kv(BUCKET), config.pool_capacity)
        dirs = seed_dirs(opts.seeds) if opts.seed else []
        if dirs and opts.validate:
            out(f"== validating {len(dirs)} seed tasks (build, reference solution = 1, empty solution < 0.5)")
            reports = await demo.validate_seeds(dirs, out)
            dirs = [d for d, r in zip(dirs, reports) if r.ok]
        shown = next((d for d in dirs if d.name == opts.through_gates), None)
        if opts.through_gates and shown is None:
            out(f"no valid seed named {opts.through_gates!r} to send through the gates")
        dirs = [d for d in dirs if d is not shown]
        if dirs:
            events = await seed_pool(bus, store, dirs)
            out(f"seeded the pool with {len(events)} tasks from {opts.seeds}")
        if shown is not None:
            out(f"== seed {shown.name} through every admission stage ({settings.route})")
            candidate = await asyncio.to_thread(demo.seed_candidate, shown, bus.blobs, settings.route_stages)
            await demo.through_gates(bus, candidate, opts.round_timeout, out)

        async def pool_size() -> int:
            return len((await store.index()).active)

        tally = LearnerTally()
        solver_rewards: list[float] = []
        trackers = await run_rounds(
            bus, pool_size, rounds=opts.rounds, fresh=opts.assignments or config.assignments_per_round,
            review=opts.review, round_timeout=opts.round_timeout, out=out,
            after_round=training_phase(bus, settings, opts.waves, tally, out, solver_rewards), observe=tally.observe,
        )
        snap = await snapshot(bus, config)
        report_path = settings.home / "report.html"
        await report.write(bus, config, report_path, snap)
    out("\n== summary")
    out(render(snap.status, len(snap.pool), snap.pool_by_category))
    rounds = {t.round for t in trackers}
    proposed = [r for r in snap.results if r.lineage.round in rounds and r.lineage.mode != "seed"]
    for line in demo.shortcomings(model=settings.model, proposer=proposed, solver_rewards=solver_rewards,
                                  trained=tally.updates > 0 or opts.waves == 0):
        out(f"note: {line}")
    out(f"report: {report_path}")
    return all(t.done for t in trackers)


def training_phase(bus: Bus, settings: Settings, waves: int | None, tally: LearnerTally, out: Out,
                   solver_rewards: list[float] | None = None) -> Phase | None:
    """After each round: its training waves, then one line of what the learner did in the
    round (``tally`` also saw the round's admissions: the proposer samples). The solver's
    training rewards are added to ``solver_rewards`` before the tally is reset. None (said
    on ``out``) when the engine cannot take new weights."""
    try:
        engine = engine_client(settings.engine, settings.model_url)
    except StaticEngineError as e:
        out(f"no training: {e}")
        return None
    config = TrainingConfig.from_env(**({} if waves is None else {"waves_per_round": waves}))

    async def phase(round_: int, feed: BusFeed | None = None, prefix: str = "") -> None:
        if config.waves_per_round:
            await train(bus, config, round_=round_, prefix=prefix or f"r{round_}", served_version=engine.version,
                        out=out, tally=tally, feed=feed)
        out(f"== round {round_} {tally.line()}")
        if solver_rewards is not None:
            solver_rewards.extend(tally.samples.get("solver", []))
        tally.reset()

    return phase


async def training_only(settings: Settings, waves: int | None, out: Out) -> bool:
    """Training waves on the current pool; False when the engine cannot take new weights.
    Raises ``EmptyPoolError`` when there is nothing to train on."""
    async with await Bus.connect(settings, name="aes-train") as bus:
        run = await record_run(bus, settings.home, "train")
        out(f"run {run.run_id}: configuration in {settings.home / CONFIG_NAME}")
        store = PoolStore(await bus.kv(BUCKET), FlywheelConfig.from_env().pool_capacity)
        if not (await store.index()).active:
            raise EmptyPoolError("the pool is empty: seed it first (aes pool seed, or aes run)")
        phase = training_phase(bus, settings, waves, LearnerTally(), out)
        if phase is None:
            return False
        await phase(0, prefix=f"t{time.strftime('%Y%m%d%H%M%S')}")
    return True
