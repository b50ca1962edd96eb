"""Publishing new weights: an HF-format folder in the blob store, announced as ``PolicyVersion``.

Served engines follow these messages through the weight-sync service
(``aes_services.serving``): the torch engine of ``aes_lib.models.torch_serve`` and vLLM
fetch the folder (``aes_lib.checkpoints.fetch_folder``) and load it. The GGUF server
(xllamacpp) cannot take torch weights and is used only where nothing trains.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from aes_lib.checkpoints import publish_folder
from aes_lib.service import Context
from aes_proto import subjects
from aes_proto.messages import PolicyName, PolicyVersion, Role


def version_prefix(prefix: str, version: int) -> str:
    return f"{prefix}/v{version:06d}"


def checkpoint_key(prefix: str, version: int) -> str:
    """Key of the manifest of ``version``'s folder (what ``PolicyVersion.checkpoint`` points at)."""
    return f"{version_prefix(prefix, version)}/manifest.json"


async def publish_policy(
    ctx: Context, folder: Path, *, version: int, step: int, prefix: str, base_model: str, run_id: str,
    policy: PolicyName = "shared", solver_updates: int = 0, trained_role: Role = "solver",
) -> PolicyVersion:
    """Upload the HF-format ``folder`` as ``version`` and announce it on ``subjects.POLICY_VERSION``."""
    ref = await asyncio.to_thread(publish_folder, ctx.blobs, version_prefix(prefix, version), folder)
    msg = PolicyVersion(idempotency_key=f"{run_id}:policy:{version}", episode_id=run_id,
                        version=version, checkpoint=ref, step=step, base_model=base_model, policy=policy,
                        solver_updates=solver_updates, trained_role=trained_role)
    await ctx.publish(subjects.POLICY_VERSION, msg)
    return msg
