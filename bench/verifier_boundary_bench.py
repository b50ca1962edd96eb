"""Seconds per trial with the trust-boundary verifier (docs/SECURITY.md: only the result paths
cross, copied by the engine) against the deny-list verifier it replaced, in the same run.

The baseline is the commit before the boundary (``BASELINE``), checked out in a temporary git
worktree; each side runs in a process of its own (``python -c`` with that tree first on the
path), on each task's own copy in that tree (so each runs its own managed template). Sides take
turns, one trial of each kind per turn, so the drift of a shared machine hits both alike; the
first turn (image builds, caches) is not counted. Per task: median seconds of a nop trial (all
verification: two containers, what crosses, test.sh, the reward read) and of an oracle trial,
and the ratio boundary / baseline.

Run: ``.venv/bin/python bench/verifier_boundary_bench.py [--repeats 5] [--baseline REV --out NAME]
[TASK_DIR ...]`` (task folders relative to the repository); writes ``bench/results/verifier_boundary.md``
(``--baseline 7df85fd --out verifier_channels.md``: against the boundary before the channels of issue 47).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "be46b13"
"""The deny-list verifier (protected paths, the agent's changes found by its own ``find``)."""
BASELINES = {BASELINE: "the deny-list verifier",
             "7df85fd": "the allow-list boundary before issue 47: one uid for the tests and their programs"}
TASKS = ["tests/sandbox/tasks/echo", "seeds/csv-sales-rollup", "seeds/git-bisect-regression",
         "seeds/migrate-library-db", "libs/aes_domains/swe/seeds/fix-negative-time-buckets"]
# One turn on one side: every task, one nop then one oracle trial each; prints {task: [nop s, oracle s]}.
_TURN = r"""
import asyncio, json, sys, time
import docker
from aes_lib.bundle import Task
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import ImageCache, NopAgent, OracleAgent, run_trial

async def turn(tasks):
    images, out = ImageCache(docker.from_env(), kinds=DomainKinds()), {}
    for path in tasks:
        task, seconds = Task.load(path), []
        for agent in (NopAgent(), OracleAgent(task)):
            t0 = time.monotonic()
            r = await run_trial(task, agent, images)
            seconds.append(time.monotonic() - t0)
            if isinstance(agent, OracleAgent) and r.reward != 1.0:
                raise SystemExit(f"{path}: the oracle earned {r.reward}\n{r.log()}")
        out[path] = seconds
    return out

print(json.dumps(asyncio.run(turn(sys.argv[1:]))))
"""


def turn(tree: Path, tasks: list[str]) -> dict[str, list[float]]:
    path = os.pathsep.join(str(tree / d) for d in ("libs", "proto", "services", "kernels"))
    out = subprocess.run([sys.executable, "-c", _TURN, *tasks], cwd=tree, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": path}, check=False)
    if out.returncode != 0:
        raise SystemExit(f"a turn in {tree} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.splitlines()[-1])


def main(tasks: list[str], repeats: int, baseline: str = BASELINE) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(base), baseline], check=True)
        try:
            sides = {"baseline": base, "boundary": ROOT}
            times: dict[str, dict[str, list[list[float]]]] = {s: {t: [] for t in tasks} for s in sides}
            for i in range(repeats + 1):
                for side, tree in sides.items():
                    for task, seconds in turn(tree, tasks).items():
                        if i:  # the first turn builds images and warms caches
                            times[side][task].append(seconds)
                print(f"turn {i + 1}/{repeats + 1} done", file=sys.stderr)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False)
    rows, ratios, oracle = [], [], []
    for task in tasks:
        med = {s: [statistics.median(x[k] for x in times[s][task]) for k in (0, 1)] for s in sides}
        ratio = [med["boundary"][k] / med["baseline"][k] for k in (0, 1)]
        ratios.append(ratio[0])
        oracle.append(ratio[1])
        rows.append(f"| {Path(task).name} | {med['baseline'][0]:.2f} | {med['boundary'][0]:.2f} | {ratio[0]:.2f} "
                    f"| {med['baseline'][1]:.2f} | {med['boundary'][1]:.2f} | {ratio[1]:.2f} |")
    return "\n".join([
        f"# Verification time per trial: this tree against {baseline}",
        "",
        f"- Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- Machine: {os.cpu_count()} CPUs, Python {platform.python_version()}, load average at the end "
        f"{os.getloadavg()[0]:.1f}",
        f"- Baseline: commit {baseline} ({BASELINES.get(baseline, 'given')}); boundary: this tree. Warm images, sides taking turns, "
        f"median of {repeats} trials of each kind per side.",
        "- nop: the empty solution, so the trial is all verification; oracle: the reference solution.",
        "",
        "| task | nop baseline s | nop boundary s | nop ratio | oracle baseline s | oracle boundary s | oracle ratio |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"Geometric mean of the nop ratios: {statistics.geometric_mean(ratios):.2f}, of the oracle ratios: "
        f"{statistics.geometric_mean(oracle):.2f} (target <= 1.2).",
        "",
    ])


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--baseline", default=BASELINE, help="the commit to compare with")
    ap.add_argument("--out", default="verifier_boundary.md", help="file name under bench/results")
    ap.add_argument("tasks", nargs="*", default=TASKS)
    args = ap.parse_args()
    report = main(args.tasks, args.repeats, args.baseline)
    (ROOT / "bench/results" / args.out).write_text(report)
    print(report)
