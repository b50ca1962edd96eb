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
from pathlib import Path

from aes_lib.config import Settings
from aes_ops.runs import EmptyPoolError, RunOptions, flywheel, training_only
from aes_ops.seeding import SEEDS_DIR


def _say(line: str) -> None:
    print(line, flush=True)


def _train(args: argparse.Namespace) -> int:
    from aes_ops import stack

    settings = stack.up(Settings.from_env())
    try:
        return 0 if asyncio.run(training_only(settings, args.waves, _say)) else 1
    except EmptyPoolError as e:
        print(e, file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    from aes_ops import stack

    settings = stack.up(Settings.from_env())
    _say(f"stack up: NATS {settings.nats_url}, blobs {settings.blob_location}, model {settings.model_url}; logs in {settings.home / 'logs'}")
    opts = RunOptions(rounds=args.rounds, assignments=args.assignments, review=args.review,
                      round_timeout=args.round_timeout, seeds=args.seeds, seed=not args.no_seed,
                      validate=not args.no_validate, through_gates=args.through_gates, waves=args.waves)
    try:
        return 0 if asyncio.run(flywheel(settings, opts, _say)) else 1
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
