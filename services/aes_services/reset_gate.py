"""Reset gate: passes environments whose two uncached builds start from the same state and
whose reference solution still scores 1.0 on the rebuild (``aes_lib.sandbox.reset.check_reset``);
rejects the rest with the paths that differ or the reference solution's output."""

from __future__ import annotations

import asyncio

import docker

from aes_proto.messages import CandidateEnv, Verdict

from aes_lib.bundle import Task
from aes_lib.gate import Gate, Judgement
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import ImageCache
from aes_lib.sandbox.reset import ResetReport, check_reset
from aes_lib.service import Context

GATE = "reset"


class ResetGateService(Gate):
    """Admission stage ``reset``: passes reproducible environments, rejects the rest."""

    stage = GATE
    ack_wait = 120.0
    budget = 5400.0
    """Two uncached builds, each capped at 1800 s, two snapshots, then the reference solution's trial."""

    async def setup(self, ctx: Context) -> None:
        self.images = ImageCache(await asyncio.to_thread(docker.from_env), kinds=DomainKinds())
        self.extra_paths = ctx.settings.reset_paths

    async def judge(self, task: Task, candidate: CandidateEnv, ctx: Context) -> Judgement:
        labels = {"aes.env_id": candidate.env_id[:32], "aes.stage": self.stage}
        report = await check_reset(task, self.images, self.extra_paths, labels=labels)
        return Judgement(Verdict(stage=GATE, ok=report.ok, reason=report.reason, detail=report.detail), report)

    def feedback(self, judgement: Judgement) -> str:
        """The reference solution's output when it failed on the rebuild (differing paths are in the detail)."""
        report = judgement.evidence
        return report.logs if isinstance(report, ResetReport) else ""
