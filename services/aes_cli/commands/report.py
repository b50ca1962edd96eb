"""``aes report OUT.html``: the status and plots in one self-contained HTML file."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from aes_lib.flywheel.status import skipped_notes
from aes_ops import report


def _run(args: argparse.Namespace) -> int:
    left_out = asyncio.run(report.write_current(args.out))
    print(f"wrote {args.out}")
    for note in skipped_notes(left_out):
        print(note)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="HTML report with reward, band-occupancy, valid-rate and learner plots")
    p.add_argument("out", type=Path, help="output .html file")
    p.set_defaults(func=_run)
