"""``aes trajectories export DIR``: the training attempts as Parquet or JSON Lines (docs/EXPORTS.md)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from aes_ops.connect import with_bus


def _run(args: argparse.Namespace) -> int:
    from aes_ops.exports import export  # pyarrow: only for this command

    path, rows = asyncio.run(with_bus("aes-export", lambda bus: export(
        bus, args.dir, args.format, tuple(args.role or ()), args.since)))
    print(f"wrote {rows} attempts to {path}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trajectories", help="what the policy sampled, for other tools")
    actions = p.add_subparsers(dest="action", required=True)
    e = actions.add_parser("export", help="one row per training attempt: chat, token ids, log-probs, reward, "
                                          "policy version, lineage (loads with pyarrow and HF datasets)")
    e.add_argument("dir", type=Path, help="output folder (trajectories.parquet or trajectories.jsonl)")
    e.add_argument("--format", choices=("parquet", "jsonl"), default="parquet")
    e.add_argument("--role", action="append", choices=("solver", "proposer"),
                   help="only this role's attempts (repeatable; default both)")
    e.add_argument("--since", type=int, default=0, metavar="VERSION",
                   help="only attempts sampled at this policy version or later")
    e.set_defaults(func=_run)
