"""``aes status``: pool, admissions and rejections by reason, valid rate, cost per valid env."""

from __future__ import annotations

import argparse
import asyncio

from aes_cli.output import print_json
from aes_lib.flywheel.status import render
from aes_ops import readout


def _run(args: argparse.Namespace) -> int:
    snap = asyncio.run(readout.read())
    if args.json:
        print_json({"pool": len(snap.pool), "pool_by_category": snap.pool_by_category, "status": snap.status})
    else:
        print(render(snap.status, len(snap.pool), snap.pool_by_category))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="what the flywheel has done so far")
    p.add_argument("--json", action="store_true", help="print the numbers as one JSON object instead")
    p.set_defaults(func=_run)
