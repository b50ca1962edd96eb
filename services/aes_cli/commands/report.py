"""``aes report OUT.html``: the status and plots in one self-contained HTML file."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from aes_proto import subjects
from aes_proto.messages import LearnerStats, ServingUpdate

from aes_lib.bus import Bus
from aes_lib.config import Settings
from aes_lib.flywheel.config import FlywheelConfig
from aes_lib.flywheel.readout import snapshot
from aes_lib.flywheel.report import build


async def _report(out: Path) -> None:
    config = FlywheelConfig.from_env()
    async with await Bus.connect(Settings.from_env(), name="aes-report") as bus:
        snap = await snapshot(bus, config)
        learner = await bus.history(subjects.LEARNER_STATS, LearnerStats)
        serving = await bus.history(subjects.SERVING_VERSION, ServingUpdate)
    page = build(snap.status, snap.results, snap.rollouts, len(snap.pool), snap.pool_by_category,
                 (config.band_low, config.band_high), learner, serving)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page)


def _run(args: argparse.Namespace) -> int:
    asyncio.run(_report(args.out))
    print(f"wrote {args.out}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="HTML report with reward, band-occupancy, valid-rate and learner plots")
    p.add_argument("out", type=Path, help="output .html file")
    p.set_defaults(func=_run)
