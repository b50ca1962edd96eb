"""Base of the services that run solver rollouts (calibrator, pool review)."""

from __future__ import annotations

from aes_lib.flywheel.config import FlywheelConfig
from aes_lib.runners.rollouts import RolloutRunner
from aes_lib.service import Context, M, Service


class SolverBackedService(Service[M]):
    """Holds a ``RolloutRunner`` (the real Docker solver unless a test injects one) and the config."""

    def __init__(self, runner: RolloutRunner | None = None, config: FlywheelConfig | None = None) -> None:
        self.runner = runner
        self.config = config

    async def setup(self, ctx: Context) -> None:
        self.config = self.config or FlywheelConfig.from_env()
        if self.runner is None:
            # Imported here: it pulls in the sandbox and model client, which tests with a runner skip.
            from aes_lib.runners.trial_runner import TrialRolloutRunner

            self.runner = TrialRolloutRunner.from_settings(ctx.settings, ctx.blobs, self.config)
