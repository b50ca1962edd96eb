"""Reset gate: passes environments whose two uncached builds start from the same state
(``aes_lib.sandbox.reset.check_reset``), rejects the rest with the paths that differ."""

from __future__ import annotations

import asyncio

import docker

from aes_proto.messages import CandidateEnv, Verdict

from aes_lib.bundle import Task
from aes_lib.gate import Gate
from aes_lib.sandbox.reset import check_reset
from aes_lib.service import Context

GATE = "reset"


class ResetGateService(Gate):
    """Admission stage ``reset``: passes reproducible environments, rejects the rest."""

    stage = GATE
    ack_wait = 120.0
    budget = 4000.0
    """Two uncached builds, each capped at 1800 s, then two snapshots."""

    async def setup(self, ctx: Context) -> None:
        self.client = docker.from_env()
        self.extra_paths = ctx.settings.reset_paths

    async def judge(self, task: Task, candidate: CandidateEnv, ctx: Context) -> Verdict:
        report = await asyncio.to_thread(check_reset, task, self.client, self.extra_paths)
        return Verdict(stage=GATE, ok=report.ok, reason=report.reason, detail=report.detail)
