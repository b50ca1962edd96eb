"""A service process for the bus tests: ``python worker.py MODE``; settings from ``AES_*``.

MODE ``crash``: publish the effect, touch ``$MARKER``, then hang (the test SIGKILLs it).
MODE ``effect``: publish the effect and return.
MODE ``slow``: touch ``$MARKER``, sleep ``$SLOW`` seconds, publish the effect (SIGTERM lands meanwhile).
With ``$SPANS`` set, finished spans are written there as JSON lines.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from aes_proto import subjects
from aes_proto.messages import Assignment, GateResult

from aes_lib import telemetry
from aes_lib.bus import run_service
from aes_lib.config import Settings
from aes_lib.service import Context, Service


def effect(msg: Assignment) -> GateResult:
    """The handler's one side effect, keyed from its input so a redelivery repeats the key."""
    return GateResult(
        idempotency_key=f"{msg.idempotency_key}:gate",
        episode_id=msg.episode_id,
        env_id=msg.lineage.assignment_id,
        gate="test",
        ok=True,
        reason="ok",
        detail=os.environ.get("WORKER_ID", ""),
    )


class Worker(Service[Assignment]):
    name = "worker"
    subject = subjects.ASSIGNMENT
    message_type = Assignment
    ack_wait = 2.0

    def __init__(self, mode: str) -> None:
        self.mode = mode

    async def handle(self, msg: Assignment, ctx: Context) -> None:
        if self.mode == "slow":
            Path(os.environ["MARKER"]).write_text(msg.idempotency_key)
            await asyncio.sleep(float(os.environ.get("SLOW", "2")))
        await ctx.publish(subjects.RESULT_GATE, effect(msg))
        if self.mode == "crash":
            Path(os.environ["MARKER"]).write_text(msg.idempotency_key)
            await asyncio.sleep(3600)


def main() -> None:
    mode = sys.argv[1]
    settings = Settings.from_env()
    if spans := os.environ.get("SPANS"):
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        out = open(spans, "w")
        telemetry.setup("worker", settings, ConsoleSpanExporter(out=out, formatter=lambda s: s.to_json(indent=None) + "\n"))
    asyncio.run(run_service(Worker(mode), settings))  # flushes its spans before returning


if __name__ == "__main__":
    main()
