"""The ``metrics`` service: the run's curves in TensorBoard (and W&B, MLflow when configured).

One process consumes four subjects (``MetricsService`` and its companions) so that every
series goes to one run per backend, on one step axis: the policy version. Learner stats,
rollout rewards and engine loads carry their version; an admission is logged at the
newest version this process has seen.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path

from aes_proto import subjects
from aes_proto.messages import CalibrationResult, LearnerStats, Message, PolicyVersion, RolloutSummary, ServingUpdate

from aes_lib.service import Context, Service
from aes_lib.tracking import Backend, MetricsConfig, Run, open_backends, series


def tracking_folder(config: MetricsConfig, home: Path) -> Path:
    return Path(config.log_dir) if config.log_dir else home / "tracking"


class MetricsService(Service[LearnerStats]):
    name = "metrics"
    subject = subjects.LEARNER_STATS
    message_type = LearnerStats

    def __init__(self, config: MetricsConfig | None = None) -> None:
        self.config = config
        self.backends: list[Backend] = []
        self.admissions = series.Admissions()
        self.version = 0
        self.lock = asyncio.Lock()  # one write at a time into each backend

    async def setup(self, ctx: Context) -> None:
        config = self.config = self.config or MetricsConfig.from_env()
        home = ctx.settings.home
        run = Run(folder=tracking_folder(config, home), project=config.project, name=config.run_name or home.name,
                  mlflow_uri=config.mlflow_uri)
        run.folder.mkdir(parents=True, exist_ok=True)
        self.backends = await asyncio.to_thread(open_backends, config.backends, run)
        history = getattr(ctx, "history", None)  # the bus has one; a test's bare context may not
        if history is not None:
            self.version = max((pv.version for pv in await history(subjects.POLICY_VERSION, PolicyVersion)), default=0)

    async def teardown(self) -> None:
        for backend in self.backends:
            await asyncio.to_thread(backend.close)

    def companions(self) -> Sequence[Service]:
        return (
            _Feed(self, "metrics-rollouts", subjects.ROLLOUT_SUMMARY, RolloutSummary,
                  lambda m: (series.rollout(m), m.policy_version)),
            _Feed(self, "metrics-admission", subjects.RESULT_CALIBRATION, CalibrationResult,
                  lambda m: (self.admissions.add(m), self.version)),
            _Feed(self, "metrics-serving", subjects.SERVING_VERSION, ServingUpdate,
                  lambda m: (series.serving(m), m.version)),
        )

    async def log(self, scalars: series.Scalars, step: int) -> None:
        if not scalars:
            return
        async with self.lock:
            for backend in self.backends:
                await asyncio.to_thread(backend.log, scalars, step)

    async def handle(self, msg: LearnerStats, ctx: Context) -> None:
        self.version = max(self.version, msg.policy_version)
        await self.log(series.learner(msg), msg.policy_version)


class _Feed(Service[Message]):
    """One more subject of the metrics process: its messages as series at a step."""

    def __init__(self, owner: MetricsService, name: str, subject: str, message_type: type[Message],
                 scalars: Callable[[Message], tuple[series.Scalars, int]]) -> None:
        self.owner, self.name, self.subject, self.message_type = owner, name, subject, message_type
        self.scalars = scalars

    async def handle(self, msg: Message, ctx: Context) -> None:
        await self.owner.log(*self.scalars(msg))
