"""``aes report OUT.html``: the status and plots in one self-contained HTML file."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
from pathlib import Path

from aes_proto import subjects
from aes_proto.messages import LearnerStats, ServingUpdate

from aes_lib.bus import Bus
from aes_lib.config import Settings
from aes_lib.flywheel.config import FlywheelConfig
from aes_ops.readout import skipped, snapshot, unique
from aes_ops.report import build
from aes_lib.flywheel.status import skipped_notes


async def _report(out: Path) -> dict[str, int]:
    """Write the report; the undecodable messages it had to leave out, by subject."""
    config = FlywheelConfig.from_env()
    async with await Bus.connect(Settings.from_env(), name="aes-report") as bus:
        snap = await snapshot(bus, config)
        learner = await bus.history(subjects.LEARNER_STATS, LearnerStats)
        serving = await bus.history(subjects.SERVING_VERSION, ServingUpdate)
    status = dataclasses.replace(snap.status, skipped={**snap.status.skipped, **skipped([learner, serving])})
    page = build(status, snap.results, snap.rollouts, len(snap.pool), snap.pool_by_category,
                 (config.band_low, config.band_high), unique(learner), unique(serving))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page)
    return status.skipped


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
