"""``aes eval DATASET``: avg@k of the solver on a Harbor dataset (what training did).

DATASET is a folder of task folders or one task folder. Each task gets k solver
attempts (the paper reports Terminal-Bench avg@5); the summary is avg@k with a
95% t interval over the per-task means (``aes_ops.evaluation``). Tasks that fail
to load or run are listed with their error and left out of the average.

The policy evaluated: ``--policy-version V`` serves the learner's published
version V (0: the base weights) from a private torch engine; otherwise whatever
``AES_MODEL_URL`` serves, or the base weights in a private engine when it is empty.
``--seed S`` makes the attempts repeatable: the same S draws the same samples from the
same policy, so two versions are compared on the same random numbers.

Exit status: 0 all tasks scored, 1 a task failed to load or run (or the model
engine did not start), 2 a bad DATASET or an unpublished ``--policy-version``; the
other failures have the statuses of ``aes_cli.errors``.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from aes_cli.errors import CommandError, Exit
from aes_cli.output import Progress, print_json, table
from aes_lib.agents.loop import LoopLimits
from aes_lib.config import Settings
from aes_ops.evaluate import DatasetError, EngineError, EvalOptions, evaluate, task_folders


# -- output -----------------------------------------------------------------------


def _table(report: dict) -> str:
    """Per-task rows: task, k rewards, mean."""
    return table(("TASK", "REWARDS", "MEAN"),
                 ((t["name"], " ".join(f"{r:.2f}" for r in t["rewards"]) or "-",
                   "FAIL" if t["error"] else f"{t['mean']:.3f}") for t in report["tasks"]))


def render(report: dict) -> str:
    """Per-task table, failures, then the avg@k summary line."""
    failures = [f"  {t['name']}: {t['error']}" for t in report["tasks"] if t["error"]]
    k, n = report["k"], report["n_tasks"]
    if report["avg"] is None:
        score = f"avg@{k} n/a (no task scored)"
    elif report["ci95"] is None:  # one task: the spread between tasks is unknown
        score = f"avg@{k} {report['avg']:.3f}, 95% CI n/a (needs 2+ tasks)"
    else:
        lo, hi = report["ci95"]
        score = f"avg@{k} {report['avg']:.3f}, 95% CI [{lo:.3f}, {hi:.3f}] (t over tasks)"
    failed = len(report["tasks"]) - n
    summary = (f"{score}; tasks {n}" + (f" ({failed} failed)" if failed else "")
               + f"; policy version {report['policy_version']}; model {report['model']}")
    if ask := report.get("ask_human"):
        summary += (f"\nask_human: {ask['attempts']} attempts, ask rate {100 * ask['ask_rate']:.1f}%, "
                    f"Ask-F1 {100 * ask['ask_f1']:.1f}%")
    return "\n".join([_table(report)] + ([""] + failures if failures else []) + ["", summary])


def _run(args: argparse.Namespace) -> int:
    folders = _input(task_folders, args.dataset)
    options = EvalOptions(k=args.k, concurrency=args.concurrency, max_turns=args.max_turns,
                          temperature=args.temperature, policy_version=args.policy_version, seed=args.seed)
    with Progress("eval") as progress:
        report = _input(lambda: asyncio.run(evaluate(folders, Settings.from_env(), options, progress)))
    if args.json:
        print_json(report)
    else:
        print(render(report))
    return 1 if any(t["error"] for t in report["tasks"]) else 0


def _input(fn, *args):
    """``fn(*args)``, its bad input a usage error and its engine failure a negative result."""
    try:
        return fn(*args)
    except DatasetError as e:
        raise CommandError(str(e)) from None
    except EngineError as e:
        raise CommandError(str(e), Exit.NEGATIVE) from None


def _positive(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {n}")
    return n


def _nonnegative(text: str) -> int:
    n = int(text)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {n}")
    return n


def _temperature(text: str) -> float:
    t = float(text)
    if not 0.0 <= t <= 2.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 2], got {t}")
    return t


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="avg@k of the solver on a Harbor dataset, with a 95%% interval over tasks")
    p.add_argument("dataset", type=Path, metavar="DATASET", help="folder of task folders, or one task folder")
    p.add_argument("--policy-version", type=_nonnegative, default=None, metavar="V",
                   help="evaluate the learner's published version V (0: base weights) in a private engine; "
                        "default: whatever AES_MODEL_URL serves")
    p.add_argument("--k", type=_positive, default=5, help="attempts per task (default 5, as avg@5)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.add_argument("--concurrency", type=_positive, default=4, metavar="N", help="attempts running at once (default 4)")
    p.add_argument("--max-turns", type=_positive, default=LoopLimits.max_turns, metavar="T", help="model calls per attempt")
    p.add_argument("--temperature", type=_temperature, default=LoopLimits.temperature, metavar="T",
                   help=f"sampling temperature of every attempt (default {LoopLimits.temperature})")
    p.add_argument("--seed", type=_nonnegative, default=None, metavar="S",
                   help="sample every attempt with seeds derived from S, the task and the attempt: the same S "
                        "repeats the attempts of the same policy and scores two policies on the same draws")
    p.set_defaults(func=_run)
