"""Publishing new weights: a safetensors checkpoint in the blob store, announced as ``PolicyVersion``.

Served engines follow these messages through the weight-sync service
(``aes_services.serving``), e.g. the torch engine of ``aes_lib.models.torch_serve``.
The GGUF server (xllamacpp) cannot take torch weights and is used only
where nothing trains.
"""

from __future__ import annotations

import asyncio

import torch

from aes_lib.learner.checkpoint import save_checkpoint
from aes_lib.service import Context
from aes_proto import subjects
from aes_proto.messages import PolicyName, PolicyVersion, Role


def checkpoint_key(prefix: str, version: int) -> str:
    return f"{prefix}/v{version:06d}.safetensors"


async def publish_policy(
    ctx: Context, model: torch.nn.Module, *, version: int, step: int, prefix: str, base_model: str, run_id: str,
    policy: PolicyName = "shared", solver_updates: int = 0, trained_role: Role = "solver",
) -> PolicyVersion:
    """Checkpoint ``model`` as ``version`` and announce it on ``subjects.POLICY_VERSION``."""
    ref = await asyncio.to_thread(save_checkpoint, ctx.blobs, checkpoint_key(prefix, version), model,
                                  {"version": str(version), "step": str(step), "base_model": base_model})
    msg = PolicyVersion(idempotency_key=f"{run_id}:policy:{version}", episode_id=run_id,
                        version=version, checkpoint=ref, step=step, base_model=base_model, policy=policy,
                        solver_updates=solver_updates, trained_role=trained_role)
    await ctx.publish(subjects.POLICY_VERSION, msg)
    return msg
