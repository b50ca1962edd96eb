"""``aes report OUT.html``: the status and plots in one self-contained HTML file."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from aes_lib.bus import Bus
from aes_lib.config import Settings
from aes_lib.flywheel.config import FlywheelConfig
from aes_lib.flywheel.status import skipped_notes
from aes_ops import report


async def _report(out: Path) -> dict[str, int]:
    async with await Bus.connect(Settings.from_env(), name="aes-report") as bus:
        return await report.write(bus, FlywheelConfig.from_env(), out)


def _run(args: argparse.Namespace) -> int:
    left_out = asyncio.run(_report(args.out))
    print(f"wrote {args.out}")
    for note in skipped_notes(left_out):
        print(note)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="HTML report with reward, band-occupancy, valid-rate and learner plots")
    p.add_argument("out", type=Path, help="output .html file")
    p.set_defaults(func=_run)
