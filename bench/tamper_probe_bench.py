"""The tamper-probe gate's cost per candidate: warm validation (image present) with and without
the probe, on the same tasks in the same run, taking turns (without, with, without, ...) so the
drift of a shared machine hits both alike; medians over ``--repeats``.

Without the probe validation runs two trials (oracle and nop, concurrently); with it, one more
after them (the probe), and a fourth (the probe's control) only when the probe earns more than
the empty solution, i.e. for a forgeable task. The table gives the trials each run took and the
ratio of wall times.

Run: ``.venv/bin/python bench/tamper_probe_bench.py [--repeats 3] [TASK_DIR ...]``; writes
``bench/results/tamper_probe.md``.
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

import docker

from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import ImageCache, validate_task

ROOT = Path(__file__).resolve().parents[1]
TASKS = [ROOT / "tests/sandbox/tasks/echo", ROOT / "seeds/csv-sales-rollup", ROOT / "seeds/fix-interval-merge",
         ROOT / "seeds/git-bisect-regression", ROOT / "tests/sandbox/tasks/plantable"]


async def main(tasks: list[Path], repeats: int) -> str:
    images = ImageCache(docker.from_env(), kinds=DomainKinds())
    rows = []
    for task in tasks:
        said: list[str] = []
        r = await validate_task(task, images, probe=False)  # build the image first: both runs warm
        times: dict[bool, list[float]] = {False: [], True: []}
        trials: dict[bool, int] = {}
        reason = ""
        for _ in range(repeats):
            for probe in (False, True):
                said.clear()
                t0 = time.monotonic()
                r = await validate_task(task, images, probe=probe, progress=said.append)
                times[probe].append(time.monotonic() - t0)
                trials[probe] = sum("reward" in line for line in said)
                reason = r.reason if probe else reason
        without, with_ = statistics.median(times[False]), statistics.median(times[True])
        rows.append(f"| {task.name} | {reason} | {trials[False]} | {trials[True]} | {without:.1f} | {with_:.1f} "
                    f"| {with_ / without:.2f} |")
    load = os.getloadavg()[0]
    return "\n".join([
        "# Tamper-probe gate: cost per candidate",
        "",
        f"- Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- Machine: {os.cpu_count()} CPUs, Python {platform.python_version()}, load average at the end {load:.1f}"
        " (shared with other work: single timings are noisy)",
        f"- Warm validation (image present), median of {repeats} runs each, with and without the probe taking turns.",
        "",
        "| task | verdict with the probe | trials without | trials with | without s | with s | with / without |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
    ])


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("tasks", nargs="*", type=Path, default=TASKS)
    args = ap.parse_args()
    report = asyncio.run(main(args.tasks, args.repeats))
    out = ROOT / "bench/results/tamper_probe.md"
    out.write_text(report)
    print(report)
