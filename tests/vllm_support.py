"""Helpers of the tests that run a real vLLM server (``vllm_server`` in conftest.py).

The server is shared by every such test, so each test first puts back the weights it starts
from (``reset``), the way vLLM itself swaps them; versions are made the way the learner makes
them: a transformers folder saved with ``save_pretrained`` and published to the blob store.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from pathlib import Path

import httpx

from aes_lib.checkpoints import publish_folder
from aes_lib.models.untie import untied_copy
from aes_proto.messages import PolicyVersion

TOL = 1e-3
"""Largest |served - trainer| log-prob accepted in fp32 (measured: see test_vllm.py)."""


def root(url: str) -> str:
    return url.rstrip("/").removesuffix("/v1")


def perturbed(base: Path, dest: Path, seed: int, scale: float = 0.05) -> Path:
    """``base`` with Gaussian noise on every weight, saved as the learner saves a version."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * scale * (p.std() if p.numel() > 1 else 1.0))
    model.save_pretrained(dest)
    AutoTokenizer.from_pretrained(base).save_pretrained(dest)
    return dest


def publish(store, folder: Path, version: int, policy: str = "shared") -> PolicyVersion:
    ref = publish_folder(store, f"test-{uuid.uuid4().hex[:8]}/v{version}", folder)
    return PolicyVersion(idempotency_key=f"{ref.key}:pv", episode_id="test", version=version, checkpoint=ref,
                         policy=policy)


async def reset(url: str, folder: Path) -> None:
    """Serve ``folder`` as the base weights again (weight version ``default``, our v0), loaded
    from an untied copy as weight sync loads every version."""
    await reload(url, folder, "default")


async def reload(url: str, folder: Path, version: str, reset_prefix_cache: bool = True) -> None:
    """Weight sync's load sequence on ``folder`` (an untied copy), by hand; without
    ``reset_prefix_cache`` it shows what the step prevents (vLLM 0.32's ``/pause`` still clears
    the caches by default through a deprecated flag, turned off here, so the reset is ours)."""
    folder = untied_copy(folder, folder.with_name(folder.name + "-untied"))
    pause = {"mode": "wait"} if reset_prefix_cache else {"mode": "wait", "clear_cache": "false"}
    steps = [("/pause", None, pause),
             ("/collective_rpc", {"method": "reload_weights", "kwargs": {"weights_path": str(folder)}}, None),
             ("/reset_prefix_cache", None, None),
             ("/update_weight_version", {"new_version": version}, None),
             ("/resume", None, None)]
    async with httpx.AsyncClient(base_url=root(url), timeout=300) as c:
        for path, body, params in steps:
            if path != "/reset_prefix_cache" or reset_prefix_cache:
                (await c.post(path, json=body, params=params)).raise_for_status()


async def running_requests(url: str) -> float:
    """Requests vLLM is decoding now (its Prometheus gauge)."""
    async with httpx.AsyncClient(timeout=10) as c:
        text = (await c.get(root(url) + "/metrics")).text
    return sum(float(m) for m in re.findall(r"^vllm:num_requests_running\{[^}]*\} (\S+)$", text, re.M))


async def until_running(url: str) -> None:
    while not await running_requests(url):
        await asyncio.sleep(0.02)


def trainer_logprobs(folder: Path, prompt_ids: list[int], completion_ids: list[int], temperature: float) -> list[float]:
    """What the trainer scores: ``log_softmax(logits / T)`` of each completion token, fp32 transformers."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    ids = torch.tensor([prompt_ids + completion_ids])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1: -1].float()
    logp = (logits / temperature).log_softmax(-1)
    return logp[torch.arange(len(completion_ids)), torch.tensor(completion_ids)].tolist()


def max_diff(a: list[float], b: list[float]) -> float:
    assert len(a) == len(b) and a, (len(a), len(b))
    return max(abs(x - y) for x, y in zip(a, b))
