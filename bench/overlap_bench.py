"""Synchronous against overlapped training waves: wall time and rollouts/h through the services.

The embedded stack (``aes_ops.stack.up``: nats-server, the engine serving SmolLM2-135M, the
wave planner, rollouts, learner and weight-sync services as processes) runs the same round
shape twice per repetition, interleaved: ``policy_lag`` 0 (the baseline: sample, update, load,
sample) and ``policy_lag`` 1 (the next wave samples while the learner trains). The task is
``tests/training/tasks/coin`` (a random verifier: groups nearly always have a spread, so every
wave brings updates). Reported per arm: wall seconds, rollouts/h, updates, samples dropped as
stale, and the ratio against the synchronous arm of the same repetition.

On one machine the engine and the learner share its cores, so overlap buys only what either
leaves idle (Docker and the verifier, the engine between waves); the same run on a GPU box,
where they sit on different devices, is where the idle engine in the synchronous loop costs most.

Run: ``.venv/bin/python bench/overlap_bench.py [--engine vllm|torch] [--waves 2] [--reps 1]``;
writes ``bench/results/overlap_bench.md``. Needs Docker, the base image and (for vLLM)
``make vllm``. About 20 minutes with the defaults on 2 cores (SmolLM2 on vLLM's CPU build: ~30 s
a rollout while the learner shares the cores); each more wave or repetition adds ~8-10.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import training_bench as tb  # noqa: E402  (machine header, log)

from aes_lib.bus import Bus  # noqa: E402
from aes_lib.config import Settings  # noqa: E402
from aes_lib.runners.pool_store import BUCKET, PoolStore  # noqa: E402
from aes_lib.flywheel.training import TrainingConfig  # noqa: E402
from aes_lib.learner.base_model import bundled_base_model  # noqa: E402
from aes_lib.models.weights import engine_client  # noqa: E402
from aes_ops import stack  # noqa: E402
from aes_ops.seeding import seed_pool  # noqa: E402
from aes_ops.waves import train  # noqa: E402
from aes_proto import subjects  # noqa: E402
from aes_proto.messages import LearnerStats  # noqa: E402
from aes_services.registry import SERVICES  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "overlap_bench.md"
TASK = ROOT / "tests" / "training" / "tasks" / "coin"
LOOP = ("training-wave", "rollouts", "orchestrator", "learner", "weight-sync")
GROUPS, SIZE, MAX_TOKENS = 2, 4, 32


@dataclass
class Arm:
    rep: int
    lag: int
    seconds: float
    rollouts: int
    updates: int
    stale: int

    @property
    def per_hour(self) -> float:
        return self.rollouts * 3600 / self.seconds


async def run_arms(settings: Settings, waves: int, reps: int, flush) -> list[Arm]:
    arms: list[Arm] = []
    client = engine_client(settings.engine, settings.model_url)
    async with await Bus.connect(settings, name="overlap-bench") as bus:
        await seed_pool(bus, PoolStore(await bus.kv(BUCKET)), [TASK])
        for rep in range(reps):
            for lag in (0, 1):
                config = TrainingConfig(groups_per_wave=GROUPS, group_size=SIZE, waves_per_round=waves, max_turns=1,
                                        max_tokens=MAX_TOKENS, policy_lag=lag, engine_wait_s=900)
                before = len(await bus.history(subjects.LEARNER_STATS, LearnerStats))
                tb.log(f"rep {rep}, policy_lag {lag}: {waves} waves of {GROUPS} x {SIZE}")
                t0 = time.monotonic()
                tally = await train(bus, config, round_=len(arms) + 1, prefix=f"r{rep}l{lag}",
                                    served_version=client.version, out=lambda line: None)
                seconds = time.monotonic() - t0
                stats = (await bus.history(subjects.LEARNER_STATS, LearnerStats))[before:]
                arms.append(Arm(rep, lag, seconds, waves * GROUPS * SIZE, tally.updates,
                                sum(s.stale_dropped for s in stats)))
                tb.log(f"  {seconds:.1f} s, {tally.updates} updates, {arms[-1].stale} stale dropped")
                flush(arms)
    return arms


def report(arms: list[Arm], header: list[str], engine: str, waves: int) -> list[str]:
    lines = ["# Synchronous vs overlapped training waves (policy_lag 0 vs 1)", "", *header,
             f"- engine: {engine} serving SmolLM2-135M (fp32); learner: DPPO on the same weights, one group a batch; "
             f"task: coin (random verifier); {waves} waves of {GROUPS} groups x {SIZE} attempts per arm, "
             f"one turn of at most {MAX_TOKENS} tokens; arms interleaved per repetition; each arm ends settled "
             "(every update trained and served)", "",
             "| rep | policy_lag | wall s | rollouts | rollouts/h | updates | stale dropped | wall vs lag 0 |",
             "|---|---|---|---|---|---|---|---|"]
    base = {a.rep: a.seconds for a in arms if a.lag == 0}
    lines += [f"| {a.rep} | {a.lag} | {a.seconds:.1f} | {a.rollouts} | {a.per_hour:,.0f} | {a.updates} | {a.stale} | "
              f"{a.seconds / base[a.rep]:.2f}x |" for a in arms if a.rep in base]
    ratios = [a.seconds / base[a.rep] for a in arms if a.lag == 1 and a.rep in base]
    if ratios:
        lines += ["", f"Median wall time of the overlapped arm against the synchronous one: "
                      f"**{statistics.median(ratios):.2f}x** ({len(ratios)} repetitions)."]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engine", choices=("vllm", "torch"), default="vllm")
    parser.add_argument("--waves", type=int, default=2)
    parser.add_argument("--reps", type=int, default=1)
    args = parser.parse_args()
    header = [*tb.machine(), f"- load average at start: {tb.load_avg()} (1/5/15 min)"]
    home = Path(tempfile.mkdtemp(prefix="aes-overlap-bench-"))
    model = bundled_base_model(Settings.from_env().home)
    os.environ.update(AES_ENGINE=args.engine, AES_LEARNER_MODEL_PATH=str(model),  # the engine starts from it too
                      AES_LEARNER_GROUPS_PER_BATCH="1", AES_LEARNER_LR="1e-5", AES_HOME=str(home))
    settings = stack.up(Settings.from_env(home=home), services={n: SERVICES[n] for n in LOOP}, progress=tb.log)

    def flush(arms: list[Arm]) -> None:
        OUT.write_text("\n".join(report(arms, header, args.engine, args.waves)) + "\n")

    try:
        flush(asyncio.run(run_arms(settings, args.waves, args.reps, flush)))
    finally:
        stack.down(home)
    tb.log(f"wrote {OUT}")


if __name__ == "__main__":
    main()
