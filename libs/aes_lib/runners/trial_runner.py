"""``RolloutRunner`` with the real solver: the model in a Docker sandbox, scored by the verifier."""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import tempfile
from pathlib import Path

from aes_proto.messages import BlobRef

from aes_lib.agents.loop import LoopLimits
from aes_lib.agents.solver import rollout, solver_limits
from aes_lib.bundle import Task, unpack
from aes_lib.flywheel.config import FlywheelConfig
from aes_proto.records import RolloutOutcome
from aes_lib.models import ChatClient, chat_client
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import ImageCache


class SolverEndpointError(ValueError):
    """No model endpoint is configured for the solver."""


class TrialRolloutRunner:
    """Unpacks each bundle once (by digest) and runs solver attempts on it."""

    def __init__(self, client: ChatClient, images: ImageCache, blobs, limits: LoopLimits, workdir: Path) -> None:
        self.client = client
        self.images = images
        # Pool seeds were written by people and imported by the operator: their sandboxes and
        # builds get what `aes pool seed` validated them with, the network where allowed.
        self.imported_images = ImageCache(images.client, images.max_build_timeout,
                                          caps=dataclasses.replace(images.caps, allow_network=True), kinds=images.kinds)
        self.blobs = blobs
        self.limits = limits
        self.workdir = workdir
        self._tasks: dict[str, Task] = {}
        self._lock = asyncio.Lock()

    @classmethod
    def from_settings(cls, settings, blobs, config: FlywheelConfig, limits: LoopLimits | None = None) -> "TrialRolloutRunner":
        if not settings.model_url:
            raise SolverEndpointError("AES_MODEL_URL is empty: the solver needs a model endpoint (aes up sets it)")
        workdir = Path(settings.home) / "tasks"
        workdir.mkdir(parents=True, exist_ok=True)
        return cls(chat_client(settings), ImageCache(kinds=DomainKinds()), blobs,
                   limits or solver_limits(config),
                   workdir)

    async def task(self, bundle: BlobRef) -> Task:
        async with self._lock:
            task = self._tasks.get(bundle.sha256)
            if task is None:
                task = self._tasks[bundle.sha256] = await asyncio.to_thread(self._unpack, bundle)
            return task

    def _unpack(self, bundle: BlobRef) -> Task:
        # Unpacked beside the destination, then renamed into place: a directory at
        # ``dest`` is always complete, whichever process (calibrator, pool review) wrote it.
        dest = self.workdir / bundle.sha256
        if not dest.exists():
            tmp = Path(tempfile.mkdtemp(dir=self.workdir, prefix=".unpack-"))
            try:
                unpack(self.blobs.get_bytes(bundle), tmp / "task")
                (tmp / "task").rename(dest)
            except OSError:
                if not dest.exists():  # not lost to a concurrent unpack of the same bundle
                    raise
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        return Task.load(dest)

    async def run(self, bundle: BlobRef, env_id: str, rollout_id: str, hints: str | None = None,
                  imported: bool = False) -> RolloutOutcome:
        task = await self.task(bundle)
        images = self.imported_images if imported else self.images
        r = await rollout(task, self.client, images, self.blobs, self.limits,
                          env_id=env_id, rollout_id=rollout_id, hints=hints)
        return r.outcome

    async def reference_solution(self, bundle: BlobRef) -> str:
        task = await self.task(bundle)
        return (task.solution_dir / "solve.sh").read_text(errors="replace")
