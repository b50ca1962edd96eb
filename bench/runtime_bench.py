"""gVisor's cost per trial: the same trials under runc and runsc, in turns, in one run.

For each seed task (image built first): the reference's trial (agent container, solve.sh, the
verifier's container, test.sh) ``--repeats`` times under each runtime, alternating, so load drifts
hit both; then the median per task, the ratio runsc / runc, and whether the rewards agree.
Needs the engine's runsc runtime (``deploy/install_runsc.sh``).

Run: ``.venv/bin/python bench/runtime_bench.py [--tasks N] [--repeats 3]``; writes
``bench/results/runtime_bench.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import statistics
import time
from pathlib import Path

from aes_lib.bundle import Task
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import ImageCache, run_trial
from aes_lib.sandbox.trial import OracleAgent

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "runtime_bench.md"
RUNTIMES = ("", "runsc")


async def measure(tasks: list[Path], repeats: int) -> list[dict]:
    images = ImageCache(kinds=DomainKinds())
    rows = []
    for d in tasks:
        task = Task.load(d)
        image = await images.build(task)
        times: dict[str, list[float]] = {r: [] for r in RUNTIMES}
        rewards: dict[str, list[float]] = {r: [] for r in RUNTIMES}
        for _ in range(repeats):
            for runtime in RUNTIMES:
                os.environ["AES_SANDBOX_RUNTIME"] = runtime
                t0 = time.monotonic()
                r = await run_trial(task, OracleAgent(task), images, image=image)
                times[runtime].append(time.monotonic() - t0)
                rewards[runtime].append(r.reward)
        os.environ.pop("AES_SANDBOX_RUNTIME", None)
        row = {"task": d.name, **{f"t_{r or 'runc'}": statistics.median(times[r]) for r in RUNTIMES},
               **{f"r_{r or 'runc'}": rewards[r] for r in RUNTIMES}}
        rows.append(row)
        print(f"{d.name}: runc {row['t_runc']:.2f}s {rewards['']}, runsc {row['t_runsc']:.2f}s {rewards['runsc']}",
              flush=True)
    return rows


def render(rows: list[dict], repeats: int) -> str:
    lines = ["# Sandbox runtime: gVisor (runsc) against runc, per trial", "",
             f"Machine: {platform.node()}, {os.cpu_count()} cores, {platform.platform()}; "
             f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC. `bench/runtime_bench.py`: the "
             f"reference's trial on each seed, {repeats} times per runtime in turns (median), images built first; "
             "runsc registered by `deploy/install_runsc.sh` (networking off).", "",
             "| task | runc (s) | runsc (s) | runsc / runc | rewards runc | rewards runsc |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['task']} | {r['t_runc']:.2f} | {r['t_runsc']:.2f} | {r['t_runsc'] / r['t_runc']:.2f} | "
                     f"{r['r_runc']} | {r['r_runsc']} |")
    runc, runsc = sum(r["t_runc"] for r in rows), sum(r["t_runsc"] for r in rows)
    same = sum(r["r_runc"] == r["r_runsc"] for r in rows)
    lines += [f"| **all** | {runc:.2f} | {runsc:.2f} | {runsc / runc:.2f} | | |", "",
              f"Over these tasks a trial under gVisor takes {runsc / runc:.2f}x its time under runc; the rewards "
              f"agree on {same} of {len(rows)} tasks."]
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, default=0, help="the first N seeds (default: all)")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    seeds = sorted(d for d in (ROOT / "seeds").iterdir() if (d / "task.toml").is_file())
    rows = asyncio.run(measure(seeds[: args.tasks or None], args.repeats))
    OUT.write_text(render(rows, args.repeats))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
