"""Publishing new weights and reloading them on the rollout side.

``publish_policy`` writes a safetensors checkpoint to the blob store and announces
it with a ``PolicyVersion`` message. ``InProcessPolicy`` is the rollout backend that
can follow those messages: a transformers model sampling in this process, recording
each token's log-prob, whose ``reload`` loads the announced checkpoint in place.

Served engines follow the same messages through the weight-sync service
(``aes_services.serving``): the torch engine of ``aes_lib.models.torch_serve``, or
vLLM. The GGUF server (xllamacpp) cannot take torch weights and is used only
where nothing trains.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import torch

from aes_lib.blobstore import BlobStore
from aes_lib.learner.checkpoint import load_checkpoint, save_checkpoint
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


@dataclass(frozen=True)
class Completion:
    token_ids: list[int]
    logprobs: list[float]
    """The sampler's log-prob of each token at temperature 1 (the DPPO anchor)."""


class InProcessPolicy:
    """Samples from a transformers causal LM in this process and follows ``PolicyVersion``."""

    def __init__(self, model: torch.nn.Module, version: int = 0) -> None:
        self.model = model.eval()
        self.version = version

    def reload(self, store: BlobStore, msg: PolicyVersion) -> bool:
        """Load ``msg``'s checkpoint if it is newer than the current weights."""
        if msg.version <= self.version:
            return False
        load_checkpoint(store, msg.checkpoint, self.model)
        self.version = msg.version
        return True

    @torch.no_grad()
    def sample(self, prompt_ids: list[int], n: int, max_new_tokens: int, *,
               generator: torch.Generator, eos_token_id: int | None = None) -> list[Completion]:
        """``n`` completions of one prompt at temperature 1, sampled as one batch with a KV cache."""
        dev = next(self.model.parameters()).device
        ids = torch.tensor([prompt_ids] * n, device=dev)
        out = self.model(input_ids=ids, use_cache=True)
        tokens: list[list[int]] = [[] for _ in range(n)]
        logps: list[list[float]] = [[] for _ in range(n)]
        done = [False] * n
        for _ in range(max_new_tokens):
            logprobs = out.logits[:, -1].float().log_softmax(-1)
            nxt = torch.multinomial(logprobs.exp().cpu(), 1, generator=generator).squeeze(1)
            for i in range(n):
                if not done[i]:
                    tokens[i].append(int(nxt[i]))
                    logps[i].append(float(logprobs[i, nxt[i]]))
                    done[i] = eos_token_id is not None and int(nxt[i]) == eos_token_id
            if all(done):
                break
            out = self.model(input_ids=nxt[:, None].to(dev), cache=out.cache, use_cache=True)
        return [Completion(t, lp) for t, lp in zip(tokens, logps)]
