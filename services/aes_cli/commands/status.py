"""``aes status``: pool, admissions and rejections by reason, valid rate, cost per valid env."""

from __future__ import annotations

import argparse
import asyncio

from aes_lib.bus import Bus
from aes_lib.config import Settings
from aes_lib.flywheel.config import FlywheelConfig
from aes_ops.readout import snapshot
from aes_lib.flywheel.status import render


async def _status() -> str:
    async with await Bus.connect(Settings.from_env(), name="aes-status") as bus:
        snap = await snapshot(bus, FlywheelConfig.from_env())
    return render(snap.status, len(snap.pool), snap.pool_by_category)


def _run(args: argparse.Namespace) -> int:
    print(asyncio.run(_status()))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("status", help="what the flywheel has done so far").set_defaults(func=_run)
