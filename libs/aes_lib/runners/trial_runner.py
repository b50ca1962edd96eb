"""``RolloutRunner`` with the real solver: the model in a Docker sandbox, scored by the verifier."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

from aes_proto.messages import BlobRef

from aes_lib.agents.loop import LoopLimits
from aes_lib.agents.solver import rollout, solver_limits
from aes_lib.bundle import Task
from aes_lib.bundle.cache import UnpackCache
from aes_lib.flywheel.config import FlywheelConfig
from aes_proto.records import RolloutOutcome
from aes_lib.models import ChatClient, chat_client
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import ImageCache


class SolverEndpointError(ValueError):
    """No model endpoint is configured for the solver."""


class TrialRolloutRunner:
    """Runs solver attempts on bundles it reads from the host's unpack cache under ``workdir``
    (``UnpackCache``: shared with the admission stages, so a candidate they read is not fetched again)."""

    def __init__(self, client: ChatClient, images: ImageCache, blobs, limits: LoopLimits,
                 workdir: Path | UnpackCache) -> None:
        self.client = client
        self.images = images
        # Pool seeds were written by people and imported by the operator: their sandboxes and
        # builds get what `aes pool seed` validated them with, the network where allowed.
        self.imported_images = ImageCache(images.client, images.max_build_timeout,
                                          caps=dataclasses.replace(images.caps, allow_network=True), kinds=images.kinds)
        self.blobs = blobs
        self.limits = limits
        self.bundles = workdir if isinstance(workdir, UnpackCache) else UnpackCache(workdir)

    @classmethod
    def from_settings(cls, settings, blobs, config: FlywheelConfig, limits: LoopLimits | None = None) -> "TrialRolloutRunner":
        if not settings.model_url:
            raise SolverEndpointError("AES_MODEL_URL is empty: the solver needs a model endpoint (aes up sets it)")
        return cls(chat_client(settings), ImageCache(kinds=DomainKinds()), blobs, limits or solver_limits(config),
                   UnpackCache.for_settings(settings))

    @contextlib.asynccontextmanager
    async def task(self, bundle: BlobRef) -> AsyncIterator[Task]:
        """The bundle's files from the host's unpack cache (fetched and put there on a miss),
        held while the caller uses them."""
        lease = await asyncio.to_thread(self.bundles.lease, bundle.sha256)
        if lease is None:
            data = await asyncio.to_thread(self.blobs.get_bytes, bundle)
            lease = await asyncio.to_thread(self.bundles.put, bundle.sha256, data)
        try:
            yield lease.task
        finally:
            await asyncio.to_thread(lease.release)

    async def run(self, bundle: BlobRef, env_id: str, rollout_id: str, hints: str | None = None,
                  imported: bool = False) -> RolloutOutcome:
        images = self.imported_images if imported else self.images
        async with self.task(bundle) as task:
            r = await rollout(task, self.client, images, self.blobs, self.limits,
                              env_id=env_id, rollout_id=rollout_id, hints=hints)
        return r.outcome

    async def reference_solution(self, bundle: BlobRef) -> str:
        async with self.task(bundle) as task:
            return (task.solution_dir / "solve.sh").read_text(errors="replace")
