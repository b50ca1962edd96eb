"""One solver attempt on a task folder (``aes solve``), against the configured or the local model."""

from __future__ import annotations

from pathlib import Path

from aes_lib.agents.loop import LoopLimits
from aes_lib.agents.solver import Rollout, rollout
from aes_lib.blobstore import open_store
from aes_lib.bundle import Task
from aes_lib.config import Settings
from aes_lib.models import chat_client
from aes_lib.models.serve import endpoint
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import ImageCache


async def solve_once(settings: Settings, task_dir: Path, limits: LoopLimits, *, model_url: str = "",
                     model: str = "") -> Rollout:
    """The attempt, its trajectory stored; ``model_url`` empty: ``AES_MODEL_URL``, else the
    local model served for the duration. The task loads (and so fails) before any model starts."""
    task = Task.load(task_dir)
    with endpoint(model_url or settings.model_url, settings.home) as url:
        async with chat_client(settings, url=url, model=model or settings.model) as client:
            await client.probe()  # an unreachable endpoint or a refused key, before Docker builds anything
            return await rollout(task, client, ImageCache(kinds=DomainKinds()),
                                 open_store(settings.blob_location, settings), limits, env_id=task.name)
