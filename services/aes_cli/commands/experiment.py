"""``aes experiment pools``: a static pool against the flywheel (and the flywheel whose proposer is
the policy being trained, arm ``both``), same solver and rollout budget, with the controls
``weighted``, ``oracle`` and ``blind``.

The experiment's shape is the ``[experiment]`` section (``AES_EXPERIMENT_*``; ``aes config show``
lists it), the solver, learner and waves the run's own sections; ``aes_ops.experiment`` runs it.
Writes ``OUT/pools_experiment.json``, ``.html`` (the page) and ``.png`` (its plot) and prints the
held-out evaluation, each arm's learning signal, where the policy proposes its proposer reward,
and the paired read-outs on the endpoint (``AES_EXPERIMENT_ENDPOINT``) with the positive
control's gate.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from aes_cli.errors import CommandError
from aes_cli.output import print_json, table
from aes_lib.flywheel.experiment import ExperimentConfig
from aes_lib.flywheel.readouts import ENDPOINTS
from aes_ops.experiment_report import gate_line, interval, markdown, number, proposer_rewards


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _points(report: dict) -> str:
    """Held-out evaluation: one row per arm and evaluation point."""
    header = ("ARM", "WAVE", "ROLLOUTS", "UPDATES", "HELD-OUT REWARD", "95% CI (seeds)", "PASS RATE")
    return table(header, ((arm, str(p["wave"]), str(p["training_rollouts"]), f"{p['updates']:.1f}",
                           number(p["mean_reward"]), interval(p["ci95"]), number(p["pass_rate"]))
                          for arm, data in report["arms"].items() for p in data["points"]))


def _run(args: argparse.Namespace) -> int:
    from aes_ops.experiment import ExperimentError, run_experiment

    try:
        report = asyncio.run(run_experiment(ExperimentConfig.from_env(), args.out, _say, args.finished_only))
    except ExperimentError as e:
        raise CommandError(str(e)) from None
    if args.json:
        print_json(report)
        return 0
    print(_points(report))
    for arm, data in report["arms"].items():
        print(f"{arm}: groups with a learning signal {data['signal_fraction']:.1%} "
              f"(95% CI {interval(data['signal_ci95'])}, {data['groups']} groups); "
              f"{data['updates']:.1f} updates; {data['selection_rollouts']:.0f} selection rollouts; "
              f"{data['wall_s']:.0f} s per run")
        if data["proposer_samples"]:
            print(f"{arm}: proposer reward per round {proposer_rewards(data['proposer_reward'])}; "
                  f"{data['proposer_samples']:.1f} proposer samples, {data['proposer_updates']:.1f} proposer updates "
                  f"per run")
    for o in report["read_outs"]:
        if o["difference"] is not None:
            print(f"{o['arm']} - {o['baseline']} {ENDPOINTS[o['endpoint']]}: {o['difference']:+.3f} "
                  f"(95% CI {interval(o['ci95'])}, detectable {number(o['detectable'])}, {o['seeds']} seeds)")
    if line := gate_line(report):
        print(line)
    print(f"results: {args.out / 'pools_experiment.json'}, page {args.out / 'pools_experiment.html'}, "
          f"plot {args.out / 'pools_experiment.png'}")
    if args.markdown:
        _write_markdown(report, args.markdown)
        print(f"summary: {args.markdown}")
    return 0


def _write_markdown(report: dict, dest: Path) -> None:
    import os
    import platform
    import time

    machine = (f"{os.cpu_count()} cores ({platform.processor() or platform.machine()}), Python "
               f"{platform.python_version()}, load average at end {os.getloadavg()[0]:.1f} (shared machine)")
    command = "aes " + " ".join(sys.argv[1:])
    dest.write_text(markdown(report, machine, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), command))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("experiment", help="experiments on the flywheel's mechanism")
    kinds = p.add_subparsers(dest="experiment", required=True)
    pools = kinds.add_parser("pools", help="static pool vs flywheel: held-out reward over the same rollout budget")
    pools.add_argument("--out", type=Path, default=Path("pools-experiment"), metavar="DIR",
                       help="where the runs, the JSON and the plot go (default ./pools-experiment)")
    pools.add_argument("--markdown", type=Path, default=None, metavar="FILE",
                       help="also write the results as a markdown summary (bench/results/pools_experiment.md)")
    pools.add_argument("--json", action="store_true", help="print the JSON report instead of the tables")
    pools.add_argument("--finished-only", action="store_true",
                       help="start no run: report those already finished under --out with the same setup "
                            "(an interrupted bench); the others are listed as left out")
    pools.set_defaults(func=_run)
