"""``aes experiment pools``: does a pool chosen for the solver's current ability teach more per
rollout than a fixed one? (issue 29; the paper's Table 3 at full scale.)

Every run (one arm, one seed) gets a stack of its own under ``<out>/runs/<arm>-s<seed>``
(nats-server and the model engine, ``aes_ops.stack``), starts from the same policy, and runs the
real services in this process, each on its own connection: the wave planner, training rollouts
in Docker, the learner and the weight sync; the flywheel arm adds the planner and its rollout
statistics, the procedural proposer, the validator, the calibrator, the pool and the pool review
(reruns, retirement out of the band). The ``both`` arm is the flywheel with the policy being
trained as its proposer (the paper's one model in both roles): the ``parametric`` mode asks the
served policy for each instance's difficulty, the proposer-samples service turns every scored
proposal into a ``role="proposer"`` sample with its reward r_P, and the shared orchestrator trains
the one model on both roles' groups (``AES_PROPOSALS_PER_ASSIGNMENT`` >= 2 proposals form one).
Three controls (issue 48): ``weighted`` is the static pool sampled by the wave planner's buffer
weights (``AES_TRAINING_BUFFER_WEIGHT``: an environment whose last group had no spread is drawn
less; the planner-stats service keeps the histories it reads); ``oracle`` has no pool of its own:
before each wave this driver retires the last wave's instances and seeds ``groups_per_wave`` fresh
ones at the true frontier, read from the held-out evaluation (``controls.frontier``), so the wave
planner samples exactly those (the positive control); ``blind`` is the flywheel with the planner's
directions by a coin (``AES_PLANNER_DIRECTION=coin``: the no-feedback ablation).
Every arm gets the same training rollouts (``waves`` x ``groups_per_wave`` x ``group_size``) and
the same learner; what the flywheel spends on choosing (calibration, review and validation runs)
and the oracle on readings of its own is counted apart, the solver runs held to the training
rollouts' turn and token limits. Before the first wave and every ``eval_every`` waves the served
policy is scored (``aes_ops.evaluate``) on a fixed held-out set of family instances per
difficulty, which no pool meets, with sampling seeded by the run's seed (the arms of a seed are
paired).

Measured per run: held-out mean reward and full-pass rate after each evaluation point (with the
95% t interval over the held-out tasks), the learner's updates, the share of training groups with
a reward spread (the learner's ``has_signal``: the groups that teach at all) with its Wilson
interval, the difficulties trained on, wall time; where the policy proposes, the mean r_P of each
round and the proposer samples and updates (``updates`` counts both roles'). ``summarize`` adds per
arm the mean over seeds and its 95% t interval; ``read_outs`` the paired differences of
``readouts.COMPARISONS`` on the endpoint (``AES_EXPERIMENT_ENDPOINT``) and at every point, the
first of them the positive control's ``gate``.

A finished run writes its result into its folder (``result.json``, with the setup it ran under);
the command run again into the same output folder reuses every finished run of the same setup, so
an interrupted experiment goes on where it stopped and one given more seeds adds to the last.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import os
import random
import shutil
import statistics
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import msgspec

from aes_lib.bus import Bus, serve
from aes_lib.config import Settings
from aes_lib.agents.limits import LoopLimits
from aes_lib.agents.solver import solver_limits
from aes_lib.families import Instance
from aes_lib.families.render import AGENT_TIMEOUT_S
from aes_lib.flywheel import controls, readouts
from aes_lib.flywheel.config import FlywheelConfig
from aes_lib.flywheel.experiment import ExperimentConfig
from aes_lib.runners.pool_store import BUCKET, PoolStore
from aes_lib.flywheel.training import TrainingConfig
from aes_lib.learner import LearnerConfig
from aes_lib.models.weights import TRAINABLE, engine_client
from aes_ops import experiment_report, pools, power, stack
from aes_ops.experiment_report import PHASES
from aes_ops.experiment_cost import Cost, per_unit
from aes_ops.evaluate import EvalOptions, evaluate
from aes_ops.evaluation import t_interval
from aes_ops.rounds import BusFeed, run_rounds
from aes_ops.seeding import seed_pool
from aes_ops.waves import LearnerTally, train
from aes_proto import subjects
from aes_proto.messages import RolloutSummary, TrajectoryRef

ROUTE = "validate,calibrate"
"""The flywheel arm's admission route: no held-out benchmark to screen for, no model reviewer."""
GENERATION = {"static": "procedural", "weighted": "procedural", "oracle": "procedural", "flywheel": "procedural",
              "blind": "procedural", "both": "parametric"}
"""Each arm's proposer mode (the arms without rounds run no proposer)."""
ROUNDS = ("flywheel", "blind", "both")
"""The arms that run flywheel rounds between their waves; the others train on a pool they are given."""


class ExperimentError(ValueError):
    """A configuration the experiment cannot run."""


@dataclasses.dataclass
class EvalPoint:
    wave: int
    training_rollouts: int
    updates: int
    policy_version: int
    mean_reward: float | None
    """avg@k over the held-out tasks."""
    ci95: list[float] | None
    """95% t interval over the held-out tasks."""
    pass_rate: float | None
    """Share of held-out attempts with reward 1."""
    by_difficulty: dict[str, float]
    """"<family>/d<difficulty>" -> mean reward."""
    failed_tasks: int


@dataclasses.dataclass
class RunResult:
    arm: str
    seed: int
    points: list[EvalPoint] = dataclasses.field(default_factory=list)
    training_rollouts: int = 0
    selection_rollouts: dict[str, int] = dataclasses.field(default_factory=dict)
    """Solver runs spent choosing environments, by purpose (calibration, pool_review)."""
    validations: int = 0
    admitted: int = 0
    retired: int = 0
    updates: int = 0
    groups: int = 0
    signal_groups: int = 0
    signal_fraction: float = 0.0
    signal_ci95: list[float] = dataclasses.field(default_factory=lambda: [0.0, 1.0])
    empty_waves: int = 0
    """Waves the flywheel's pool had nothing to sample (its rollouts unspent)."""
    trained_difficulty: list[float] = dataclasses.field(default_factory=list)
    """Mean difficulty of each wave's training groups."""
    cost: Cost = dataclasses.field(default_factory=Cost)
    proposer_reward: list[float] = dataclasses.field(default_factory=list)
    """Mean r_P of each round's scored proposals written by the policy (the ``both`` arm; empty
    where no model proposes)."""
    proposer_samples: int = 0
    """Proposer episodes that went to the learner as samples."""
    proposer_updates: int = 0
    """Learner updates on proposer groups."""
    wall_s: float = 0.0
    phase_s: dict[str, float] = dataclasses.field(default_factory=dict)
    """Where the wall time went: ``stack`` (up and down), ``evaluation`` (held-out), ``training``
    (the waves), ``choosing`` (the rest: the flywheel's rounds, seeding, accounting)."""

    @contextlib.contextmanager
    def timing(self, phase: str) -> Iterator[None]:
        began = time.monotonic()
        try:
            yield
        finally:
            self.phase_s[phase] = self.phase_s.get(phase, 0.0) + time.monotonic() - began


# -- plumbing -------------------------------------------------------------------------


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` in ``os.environ`` for the duration: the services (and the engine process the
    stack starts) read their settings from it."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.asynccontextmanager
async def _running(settings: Settings, services: list) -> AsyncIterator[None]:
    """Each service on its own connection, as separate processes would be; drained on exit."""
    stop = asyncio.Event()
    buses = [await Bus.connect(settings, name=s.name) for s in services]
    tasks = [asyncio.create_task(serve(s, b, stop)) for s, b in zip(services, buses)]
    try:
        yield
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        for b in buses:
            await b.close()


def _services(arm: str, training: TrainingConfig, learner: LearnerConfig) -> list:
    from aes_services.calibrator import CalibratorService
    from aes_services.learner import LearnerService
    from aes_services.orchestrator import OrchestratorService
    from aes_services.planner import PlannerService, RolloutStatsService
    from aes_services.pool import PoolReviewService, PoolService
    from aes_services.proposer import ProposerService
    from aes_services.proposer_samples import ProposerSampleService
    from aes_services.serving import WeightSyncService
    from aes_services.training import TrainingRolloutService, WavePlannerService
    from aes_services.validator import ValidatorService

    common = [WavePlannerService(), TrainingRolloutService(config=training), OrchestratorService(learner),
              LearnerService(learner), WeightSyncService()]
    if arm not in ROUNDS:  # the weighted arm's buffer weights read the planner-stats histories
        return common + [RolloutStatsService()] if arm == "weighted" else common
    flywheel = common + [RolloutStatsService(), PlannerService(), ProposerService(), ValidatorService(),
                         CalibratorService(), PoolService(), PoolReviewService()]
    # The policy's proposals become its samples: the (shared) orchestrator takes both roles.
    return flywheel + [ProposerSampleService()] if arm == "both" else flywheel


# -- one run --------------------------------------------------------------------------


class _Difficulties:
    """Pool env id -> the family instance its bundle records (read once per environment)."""

    def __init__(self, store: PoolStore, blobs, workdir: Path) -> None:
        self.store, self.blobs, self.workdir = store, blobs, workdir
        self.known: dict[str, Instance | None] = {}

    async def of(self, env_id: str) -> Instance | None:
        if env_id not in self.known:
            from aes_lib import families
            from aes_lib.bundle import unpack

            entry = await self.store.entry(env_id)
            found = None
            if entry is not None:
                dest = self.workdir / env_id[:16]
                if not dest.exists():
                    await asyncio.to_thread(unpack, self.blobs.get_bytes(entry.bundle), dest)
                with contextlib.suppress(families.FamilyError):
                    found = families.read_instance(dest)
            self.known[env_id] = found
        return self.known[env_id]


async def _heldout(settings: Settings, held: list[Instance], folders: list[Path], seed: int, cfg: ExperimentConfig,
                   training: TrainingConfig) -> tuple[dict, dict[str, float], list[float]]:
    """The served policy on the held-out set: ``evaluate``'s report, the mean reward per
    ``"<family>/d<difficulty>"`` and every attempt's reward."""
    # Seeded by the run's seed: both arms of a seed, and every point of a run, draw the same
    # random numbers, so a difference between them is the policy's, not the sampler's.
    report = await evaluate(folders, settings, EvalOptions(
        k=cfg.eval_k, concurrency=4, max_turns=training.max_turns, max_tokens=training.max_tokens,
        temperature=training.temperature, history_turns=training.history_turns,
        context_tokens=training.context_tokens, seed=seed))
    level: dict[str, list[float]] = {}
    attempts: list[float] = []
    for inst, task in zip(held, report["tasks"]):
        if task["mean"] is not None:
            level.setdefault(f"{inst.family}/d{inst.params.difficulty}", []).append(task["mean"])
            attempts += task["rewards"]
    return report, {k: statistics.fmean(v) for k, v in sorted(level.items())}, attempts


async def _heldout_point(settings: Settings, held: list[Instance], folders: list[Path], wave: int,
                         result: RunResult, tally: LearnerTally, cfg: ExperimentConfig, training: TrainingConfig,
                         say: Callable[[str], None]) -> None:
    with result.timing("evaluation"):
        report, by_difficulty, attempts = await _heldout(settings, held, folders, result.seed, cfg, training)
    point = EvalPoint(
        wave=wave, training_rollouts=result.training_rollouts, updates=tally.updates,
        policy_version=report["policy_version"] if isinstance(report["policy_version"], int) else -1,
        mean_reward=report["avg"], ci95=report["ci95"],
        pass_rate=sum(r >= 1.0 for r in attempts) / len(attempts) if attempts else None,
        by_difficulty=by_difficulty,
        failed_tasks=len(report["tasks"]) - report["n_tasks"])
    result.points.append(point)
    mean = "n/a" if point.mean_reward is None else f"{point.mean_reward:.3f}"
    say(f"  [{result.arm} s{result.seed}] held-out after wave {wave} ({point.updates} updates, "
        f"v{point.policy_version}): mean reward {mean}, pass rate {point.pass_rate}")


async def run_arm(arm: str, seed: int, cfg: ExperimentConfig, policy: Path, out: Path,
                  say: Callable[[str], None] = print) -> RunResult:
    """One run of ``arm`` from ``policy`` with its own stack under ``out/runs``."""
    names = cfg.family_names()
    training = TrainingConfig.from_env(waves_per_round=1)
    learner = LearnerConfig.from_env(model_path=str(policy))
    # The oracle's pool holds one wave's fresh instances.
    capacity = max(cfg.static_pool_size, training.groups_per_wave) if arm == "oracle" else cfg.static_pool_size
    flywheel = _flywheel(training, generation_mode=GENERATION[arm], pool_capacity=capacity)
    home = out / "runs" / f"{arm}-s{seed}"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    held = pools.heldout(names, cfg.heldout_per_difficulty, cfg.max_difficulty)
    start = (pools.static_pool(names, cfg.static_pool_size, seed, cfg.max_difficulty) if arm in ("static", "weighted")
             else [] if arm == "oracle" else pools.flywheel_start(names, cfg.start_per_family, seed))
    pools.disjoint(start, held)
    held_dirs = pools.write_instances(held, home / "heldout")
    start_dirs = pools.write_instances(start, home / "start")
    base = Settings.from_env()
    engine = base.engine if base.engine in TRAINABLE else "torch"
    env = {"AES_LEARNER_MODEL_PATH": str(policy), "AES_GENERATION_MODE": GENERATION[arm], "AES_ROUTE": ROUTE,
           "AES_SOLVER_MAX_TURNS": str(training.max_turns), "AES_SOLVER_MAX_TOKENS": str(training.max_tokens),
           "AES_POOL_CAPACITY": str(capacity), "AES_ENGINE": engine,
           # every arm sets both, so that neither control's setting leaks into another arm
           "AES_TRAINING_BUFFER_WEIGHT": str(cfg.buffer_weight if arm == "weighted" else 1.0),
           "AES_PLANNER_DIRECTION": "coin" if arm == "blind" else "pass_rate"}
    result = RunResult(arm=arm, seed=seed)
    began = time.monotonic()
    with _environment(env):
        with result.timing("stack"):
            # The proposer's model, where one proposes, is the policy being trained: the run's engine.
            settings = await asyncio.to_thread(
                stack.up, dataclasses.replace(base, home=home, blob_url="", model_url="", engine=engine, route=ROUTE,
                                              proposer_model_url="", proposer_model=""),
                {}, True)
        try:
            await _drive(arm, cfg, settings, training, learner, flywheel, held, held_dirs, start_dirs, result, home,
                         say)
        finally:
            with result.timing("stack"):
                await asyncio.to_thread(stack.down, home)
    result.wall_s = time.monotonic() - began
    result.phase_s["choosing"] = result.wall_s - sum(result.phase_s.values())
    return result


async def _drive(arm, cfg, settings, training, learner, flywheel, held, held_dirs, start_dirs, result, home,
                 say) -> None:
    engine = engine_client(settings.engine, settings.model_url)
    tally = LearnerTally()
    async with await Bus.connect(settings, name="aes-experiment") as bus:
        store = PoolStore(await bus.kv(BUCKET), flywheel.pool_capacity)
        await seed_pool(bus, store, start_dirs)
        difficulties = _Difficulties(store, bus.blobs, home / "pool-tasks")
        quiet = lambda line: None  # noqa: E731 -- the waves' and rounds' own lines would drown the summary
        async with _running(settings, _services(arm, training, learner)):
            await _heldout_point(settings, held, held_dirs, 0, result, tally, cfg, training, say)
            waves_done = 0
            rng, at = random.Random(f"oracle/{result.seed}"), {}

            async def at_the_frontier() -> None:
                """The oracle's pool for the next wave: the last wave's instances retired, fresh ones
                seeded at the frontier, read every ``frontier_every`` waves from the last
                evaluation where the weights served are still those it scored, else from an
                evaluation of its own (counted with the selection rollouts)."""
                nonlocal at
                if waves_done % cfg.frontier_every == 0:
                    last = result.points[-1]
                    by_difficulty = last.by_difficulty
                    if last.policy_version != await engine.version():
                        _, by_difficulty, _ = await _heldout(settings, held, held_dirs, result.seed, cfg, training)
                        result.selection_rollouts["frontier"] = (result.selection_rollouts.get("frontier", 0)
                                                                 + len(held) * cfg.eval_k)
                    at = controls.frontier(by_difficulty)
                fresh = pools.at_frontier(at, training.groups_per_wave, rng)
                pools.disjoint(fresh, held)
                await store.retire((await store.index()).active)
                await seed_pool(bus, store, pools.write_instances(fresh, home / "oracle" / f"w{waves_done}"))

            async def phase(round_: int, feed: BusFeed) -> None:
                nonlocal waves_done
                for _ in range(min(cfg.waves_per_round, cfg.waves - waves_done)):
                    if arm == "oracle":
                        await at_the_frontier()
                    if (await store.index()).active:
                        with result.timing("training"):
                            await train(bus, training, round_=round_, prefix=f"{arm}s{result.seed}w{waves_done}",
                                        served_version=engine.version, out=quiet, tally=tally, feed=feed)
                        result.training_rollouts += training.groups_per_wave * training.group_size
                        line = f"{tally.updates} updates so far"
                    else:  # reviews retired everything and nothing was admitted
                        result.empty_waves += 1
                        line = "the pool is empty, its rollouts go unspent"
                    waves_done += 1
                    say(f"  [{arm} s{result.seed}] wave {waves_done}/{cfg.waves}: {line}")
                    if waves_done % cfg.eval_every == 0 or waves_done == cfg.waves:
                        await _heldout_point(settings, held, held_dirs, waves_done, result, tally, cfg,
                                             training, say)

            rounds = -(-cfg.waves // cfg.waves_per_round)
            if arm not in ROUNDS:
                async with BusFeed.open(bus) as feed:
                    for r in range(1, rounds + 1):
                        await phase(r, feed)
            else:
                async def pool_size() -> int:
                    return len((await store.index()).active)

                await run_rounds(bus, pool_size, rounds=rounds, fresh=flywheel.assignments_per_round, review=True,
                                 round_timeout=cfg.round_timeout_s, out=quiet, after_round=phase)
                # A round that found the pool empty ran no phase: its waves are empty, and the
                # held-out points still fall on their waves, so the run keeps its final point.
                async with BusFeed.open(bus) as feed:
                    while waves_done < cfg.waves:
                        await phase(rounds, feed)
        await _account(bus, result, tally, difficulties)
        await _proposer_account(bus, result)


async def _account(bus, result: RunResult, tally: LearnerTally, difficulties: _Difficulties) -> None:
    """What the bus recorded: groups and their spread, selection runs, pool changes."""
    from aes_proto.messages import CalibrationResult, PoolEvent, ValidationResult

    refs = [r for r in await bus.history(subjects.TRAJECTORIES, TrajectoryRef) if r.role == "solver"]
    groups: dict[str, list[float]] = {}
    for r in refs:
        groups.setdefault(r.group_id, []).append(r.reward)
    frac, ci, n = pools.signal_fraction(groups)
    result.groups, result.signal_fraction, result.signal_ci95 = n, frac, list(ci)
    result.signal_groups = round(frac * n)
    result.updates = tally.updates
    summaries = await bus.history(subjects.ROLLOUT_SUMMARY, RolloutSummary)
    for s in summaries:
        if s.purpose != "training":
            result.selection_rollouts[s.purpose] = result.selection_rollouts.get(s.purpose, 0) + 1
    validations = await bus.history(subjects.RESULT_VALIDATION, ValidationResult)
    result.validations = len(validations)
    result.cost = Cost.of(summaries, validations, await bus.history(subjects.RESULT_CALIBRATION, CalibrationResult))
    # the oracle's readings of the held-out set of its own choose too, though no summary records them
    result.cost.selection.rollouts += result.selection_rollouts.get("frontier", 0)
    events = await bus.history(subjects.POOL_EVENT, PoolEvent)
    result.admitted = sum(e.kind == "admitted" for e in events if e.reason == "calibrated")
    result.retired = sum(e.kind == "retired" for e in events)
    by_wave: dict[str, list[int]] = {}
    for r in refs:
        inst = await difficulties.of(r.env_id)
        if inst is not None:
            by_wave.setdefault(r.group_id.split("-")[0], []).append(inst.params.difficulty)
    result.trained_difficulty = [statistics.fmean(v) for _, v in sorted(by_wave.items(), key=lambda kv: _wave_no(kv[0]))]


async def _proposer_account(bus, result: RunResult) -> None:
    """The policy's proposals: r_P per round, the samples they made and the updates on them."""
    from aes_proto.messages import CalibrationResult, LearnerStats

    by_round: dict[int, list[float]] = {}
    for c in await bus.history(subjects.RESULT_CALIBRATION, CalibrationResult):
        if c.proposal is not None:  # a model's episode (procedural instances carry none)
            by_round.setdefault(c.lineage.round, []).append(c.proposer_reward)
    result.proposer_reward = [statistics.fmean(v) for _, v in sorted(by_round.items())]
    result.proposer_samples = sum(r.role == "proposer" for r in await bus.history(subjects.TRAJECTORIES, TrajectoryRef))
    result.proposer_updates = sum(s.role == "proposer" for s in await bus.history(subjects.LEARNER_STATS, LearnerStats))


def _wave_no(prefix: str) -> int:
    tail = prefix.rsplit("w", 1)[-1]
    return int(tail) if tail.isdigit() else -1


# -- the experiment ---------------------------------------------------------------------


def paired(runs: list[RunResult], arm: str, baseline: str) -> list[dict]:
    """Per evaluation point: ``arm`` minus ``baseline`` in held-out mean reward, seed by seed (the
    arms of a seed start alike and draw alike), with the mean difference, its 95% t interval, its
    sd over seeds and the smallest difference that many seeds detect at that sd (80% power)."""
    base = {r.seed: r for r in runs if r.arm == baseline}
    mine = [r for r in runs if r.arm == arm and r.seed in base]
    rows = []
    for i, p in enumerate(mine[0].points if mine else []):
        diffs = [r.points[i].mean_reward - base[r.seed].points[i].mean_reward for r in mine
                 if i < len(r.points) and i < len(base[r.seed].points)
                 and None not in (r.points[i].mean_reward, base[r.seed].points[i].mean_reward)]
        rows.append({"wave": p.wave, "training_rollouts": p.training_rollouts, **power.paired_summary(diffs)})
    return rows


def read_outs(runs: list[RunResult], endpoint: str = "final") -> list[dict]:
    """Each of ``readouts.COMPARISONS`` whose two arms ran: ``power.read_out`` on ``endpoint``,
    with ``paired``'s rows under ``points``."""
    def curves(arm: str) -> dict[int, list[float | None]]:
        return {r.seed: [p.mean_reward for p in r.points] for r in runs if r.arm == arm}

    ran = {r.arm for r in runs}
    return [{**power.read_out(arm, baseline, curves(arm), curves(baseline), endpoint),
             "points": paired(runs, arm, baseline)}
            for arm, baseline in readouts.COMPARISONS if {arm, baseline} <= ran]


def gate(outs: list[dict]) -> dict | None:
    """``readouts.gate`` on the read-out of ``readouts.COMPARISONS``' first pair (its rows per point
    aside); None where either arm is missing."""
    first = next((o for o in outs if (o["arm"], o["baseline"]) == readouts.COMPARISONS[0]), None)
    return readouts.gate(None if first is None else {k: v for k, v in first.items() if k != "points"})


def _family_mean(point: EvalPoint, family: str | None) -> float | None:
    """Held-out mean reward at ``point``, overall (None) or over one family's difficulties."""
    if family is None:
        return point.mean_reward
    mine = [v for k, v in point.by_difficulty.items() if k.rsplit("/d", 1)[0] == family]
    return statistics.fmean(mine) if mine else None


def gains(runs: list[RunResult]) -> list[dict]:
    """Learning within an arm: held-out mean reward at the last point minus before training, seed
    by seed (the same held-out draws), overall and per family, with the mean and its 95% t interval."""
    names = sorted({k.rsplit("/d", 1)[0] for r in runs for p in r.points for k in p.by_difficulty})
    rows = []
    for family in [None, *names]:
        diffs = [last - first for r in runs if len(r.points) > 1
                 and None not in (first := _family_mean(r.points[0], family), last := _family_mean(r.points[-1], family))]
        rows.append({"family": family or "all", "seeds": len(diffs), "gain": statistics.fmean(diffs) if diffs else None,
                     "ci95": list(ci) if (ci := t_interval(diffs, bounds=(-1.0, 1.0))) else None})
    return rows


def summarize(runs: list[RunResult]) -> dict[str, dict]:
    """Per arm: held-out mean reward and pass rate at each evaluation point over seeds (mean, 95%
    t interval over seeds when there are 2+), the gain since
    before training (overall and per family), signal-carrying
    groups pooled over seeds and the cost per signal, the mean r_P of each round over the seeds that
    reached it and the proposer samples and updates per run."""
    from aes_lib.flywheel.status import wilson

    arms: dict[str, dict] = {}
    order = list(dict.fromkeys(r.arm for r in runs))
    for arm in order:
        mine = [r for r in runs if r.arm == arm]
        rows = []
        for i, p in enumerate(mine[0].points):
            at = [r.points[i] for r in mine if i < len(r.points)]
            means = [q.mean_reward for q in at if q.mean_reward is not None]
            passes = [q.pass_rate for q in at if q.pass_rate is not None]
            rows.append({"wave": p.wave, "training_rollouts": p.training_rollouts,
                         "updates": statistics.fmean(q.updates for q in at),
                         "mean_reward": statistics.fmean(means) if means else None,
                         "ci95": list(ci) if (ci := t_interval(means)) else None,
                         "pass_rate": statistics.fmean(passes) if passes else None,
                         "pass_ci95": list(ci) if (ci := t_interval(passes)) else None, "seeds": len(at)})
        k, n = sum(r.signal_groups for r in mine), sum(r.groups for r in mine)
        rounds = max(len(r.proposer_reward) for r in mine)
        arms[arm] = {"points": rows, "signal_fraction": k / n if n else 0.0, "signal_ci95": list(wilson(k, n)),
                     "cost": per_unit([r.cost for r in mine], sum(r.admitted for r in mine), k),
                     "gain": gains(mine),
                     "groups": n, "updates": statistics.fmean(r.updates for r in mine),
                     "selection_rollouts": sum(sum(r.selection_rollouts.values()) for r in mine) / len(mine),
                     "wall_s": statistics.fmean(r.wall_s for r in mine),
                     "phase_s": {k: statistics.fmean(r.phase_s.get(k, 0.0) for r in mine) for k in PHASES},
                     "proposer_reward": [statistics.fmean(r.proposer_reward[i] for r in mine
                                                          if i < len(r.proposer_reward)) for i in range(rounds)],
                     "proposer_samples": statistics.fmean(r.proposer_samples for r in mine),
                     "proposer_updates": statistics.fmean(r.proposer_updates for r in mine)}
    return arms


def _flywheel(training: TrainingConfig, **changes: object) -> FlywheelConfig:
    """The flywheel's settings in a run: the solver outside training acts under training's turns and tokens."""
    return FlywheelConfig.from_env(solver_max_turns=training.max_turns, solver_max_tokens=training.max_tokens, **changes)


def attempt_limits() -> tuple[LoopLimits, ...]:
    """The limits of a run's attempts at an instance (training, then calibration and held-out
    evaluation: training's too), each of which the bootstrap is taught to answer."""
    from aes_services.training import training_limits

    training = TrainingConfig.from_env()
    flywheel = _flywheel(training)
    both = (training_limits(training, flywheel.agent_protocol), solver_limits(flywheel))
    return tuple({limits.prompt(): limits for limits in (b.within(AGENT_TIMEOUT_S) for b in both)}.values())


def prepare_policy(cfg: ExperimentConfig, out: Path, say: Callable[[str], None]) -> Path:
    """The starting policy's folder: the configured one, or the bootstrap written under ``out``
    (made again when the bootstrap settings changed since)."""
    if cfg.policy != "bootstrap":
        folder = Path(cfg.policy)
        if not (folder / "config.json").is_file():
            raise ExperimentError(f"AES_EXPERIMENT_POLICY: {folder} is not a transformers model folder (no config.json)")
        return folder
    from aes_lib.learner.base_model import bundled_base_model
    from aes_ops.bootstrap_policy import PolicySpec, bootstrap, made_from

    dest = out / "policy"
    spec = PolicySpec(hidden_size=cfg.bootstrap_width, examples=cfg.bootstrap_examples, levels=cfg.bootstrap_levels,
                      steps=cfg.bootstrap_steps, near_miss_share=cfg.bootstrap_near_miss, limits=attempt_limits())
    if not made_from(dest, cfg.family_names(), spec):
        say(f"bootstrapping the policy ({cfg.bootstrap_steps} supervised steps on {cfg.bootstrap_examples} instances "
            f"of the {cfg.bootstrap_levels} easiest difficulties, and the parametric proposer's prompt)")
        shutil.rmtree(dest, ignore_errors=True)
        bootstrap(bundled_base_model(Settings.from_env().home), dest, cfg.family_names(), spec)
    return dest


RESULT = "result.json"
"""A finished run's outcome and the setup it ran under, written last into its folder."""


def _setup(cfg: ExperimentConfig, policy: Path) -> dict:
    """Everything a run's outcome depends on besides its arm and seed: the experiment's shape
    (which seeds and arms are asked for, and the endpoint they are read on, aside), the solver,
    learner and flywheel settings, the engine and the starting policy's weights."""
    weights = sorted(policy.glob("*.safetensors"))
    return json.loads(json.dumps({
        **_settings(cfg, TrainingConfig.from_env(), LearnerConfig.from_env(), FlywheelConfig.from_env()),
        "engine": Settings.from_env().engine,
        "policy": {w.name: hashlib.sha256(w.read_bytes()).hexdigest() for w in weights}}))


def _settings(cfg: ExperimentConfig, training: TrainingConfig, learner: LearnerConfig,
              flywheel: FlywheelConfig) -> dict:
    shape = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in ("seeds", "arms", "endpoint")}
    return {"experiment": shape, "training": dataclasses.asdict(training), "learner": dataclasses.asdict(learner),
            "flywheel": dataclasses.asdict(flywheel)}


def _record(home: Path, setup: dict, result: RunResult) -> None:
    (home / RESULT).write_bytes(msgspec.json.encode(_Record(setup, result)))


def _finished(home: Path, setup: dict) -> RunResult | None:
    """The run a previous invocation finished in ``home`` under ``setup``; None where there is none
    (or it ran under another setup, or its record does not read: it is run again)."""
    try:
        record = msgspec.json.decode((home / RESULT).read_bytes(), type=_Record)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    return record.result if _with_new_defaults(record.setup) == setup else None


def _with_new_defaults(recorded: dict) -> dict:
    """``recorded`` with each setting added since it was written at its default: a new setting's
    default keeps the behaviour from before it existed, so that run is the one the default makes."""
    defaults = json.loads(json.dumps(_settings(ExperimentConfig(), TrainingConfig(), LearnerConfig(), FlywheelConfig())))
    return {k: {**defaults[k], **v} if k in defaults and isinstance(v, dict) else v for k, v in recorded.items()}


@dataclasses.dataclass
class _Record:
    setup: dict
    result: RunResult


async def run_experiment(cfg: ExperimentConfig, out: Path, say: Callable[[str], None] = print,
                         finished_only: bool = False) -> dict:
    """Every arm for every seed, one after another; writes ``out/pools_experiment.json``, its plot
    and its HTML page (``experiment_report.write``) and returns what the JSON holds.
    ``finished_only``: start no run, report those finished before under the same setup (an
    interrupted bench's report); the others are listed as left out."""
    if "both" in cfg.arm_names() and (n := FlywheelConfig.from_env().proposals_per_assignment) < 2:
        # one proposal per assignment is a group of one: no spread, no proposer update, ever
        raise ExperimentError(f"the both arm trains its proposer on groups of proposals: "
                              f"AES_PROPOSALS_PER_ASSIGNMENT must be >= 2, got {n}")
    out.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    policy = await asyncio.to_thread(prepare_policy, cfg, out, say)
    setup = _setup(cfg, policy)
    runs: list[RunResult] = []
    left_out: list[str] = []
    for seed in range(cfg.seeds):
        for arm in cfg.arm_names():
            home = out / "runs" / f"{arm}-s{seed}"
            if (done := _finished(home, setup)) is not None:
                say(f"== {arm}, seed {seed}: finished before under the same setup ({home / RESULT}), reused")
                runs.append(done)
                continue
            if finished_only:
                say(f"== {arm}, seed {seed}: not finished under this setup, left out")
                left_out.append(f"{arm} s{seed}")
                continue
            say(f"== {arm}, seed {seed}")
            runs.append(await run_arm(arm, seed, cfg, policy, out, say))
            _record(home, setup, runs[-1])
            say(f"   done in {runs[-1].wall_s:.0f} s: {runs[-1].updates} updates, signal groups "
                f"{runs[-1].signal_groups}/{runs[-1].groups}")
    if not runs:
        raise ExperimentError(f"no run under {out / 'runs'} finished under this setup: nothing to report")
    training = TrainingConfig.from_env()
    report = {
        "config": dataclasses.asdict(cfg),
        "training": {"groups_per_wave": training.groups_per_wave, "group_size": training.group_size,
                     "max_turns": training.max_turns, "max_tokens": training.max_tokens,
                     "temperature": training.temperature},
        "learner": {"lr": LearnerConfig.from_env().lr, "groups_per_batch": LearnerConfig.from_env().groups_per_batch},
        "policy": str(policy),
        "rollout_budget": cfg.waves * training.groups_per_wave * training.group_size,
        "heldout": [pools.folder_name(i) for i in pools.heldout(cfg.family_names(), cfg.heldout_per_difficulty,
                                                                  cfg.max_difficulty)],
        "runs": [dataclasses.asdict(r) for r in runs],
        "left_out": left_out,
        "arms": summarize(runs),
        "read_outs": (outs := read_outs(runs, cfg.endpoint)),
        "gate": gate(outs),
        "wall_s": time.monotonic() - began,
    }
    (out / "pools_experiment.json").write_text(json.dumps(report, indent=2))
    experiment_report.write(report, out)
    return report
