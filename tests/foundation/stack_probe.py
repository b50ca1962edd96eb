"""A tiny service the stack test runs as a process: turns an Assignment into a GateResult."""

from __future__ import annotations

import asyncio

from aes_proto import subjects
from aes_proto.messages import Assignment, GateResult

from aes_lib.service import Context, Service


class Probe(Service[Assignment]):
    name = "probe"
    subject = subjects.ASSIGNMENT
    message_type = Assignment

    async def handle(self, msg: Assignment, ctx: Context) -> None:
        await ctx.publish(subjects.RESULT_GATE, GateResult(
            idempotency_key=f"{msg.idempotency_key}:probe", episode_id=msg.episode_id,
            env_id=msg.lineage.assignment_id, gate="probe", ok=True, reason="ok",
            detail=f"loop {type(asyncio.get_running_loop()).__module__}"))
