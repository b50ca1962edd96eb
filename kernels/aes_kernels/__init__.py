"""DPPO math for the learner: Triton kernels on CUDA, the torch reference elsewhere.

``token_logprobs`` and ``dppo_objective`` pick the implementation per call:
``backend="auto"`` uses Triton for CUDA tensors, and for CPU tensors only when
``TRITON_INTERPRET=1`` (the Triton interpreter, used by the tests); otherwise the
torch reference. ``"triton"`` and ``"torch"`` force one. (The dispatcher is not named ``dppo_loss``:
importing the submodule of that name would replace it on the package.)
"""

from __future__ import annotations

import os
from typing import Literal

import torch

from aes_kernels.reference import Divergence, DppoOutput, dppo_loss_reference, token_logprobs_reference

Backend = Literal["auto", "triton", "torch"]


def use_triton(device: torch.device, backend: Backend = "auto") -> bool:
    """Whether ``backend`` resolves to the Triton kernels for tensors on ``device``."""
    if backend not in ("auto", "triton", "torch"):
        raise ValueError(f"backend must be 'auto', 'triton' or 'torch', got {backend!r}")
    if backend != "auto":
        return backend == "triton"
    return device.type == "cuda" or os.environ.get("TRITON_INTERPRET") == "1"


def token_logprobs(h: torch.Tensor, w: torch.Tensor, y: torch.Tensor, *, backend: Backend = "auto") -> torch.Tensor:
    """Log-prob of each sampled token ``y [T]`` under ``softmax(h [T, H] @ w [V, H].T)`` -> fp32 ``[T]``."""
    if use_triton(h.device, backend):
        from aes_kernels.fused_logprob import token_logprobs_triton

        return token_logprobs_triton(h, w, y)
    return token_logprobs_reference(h, w, y)


def dppo_objective(
    logp: torch.Tensor,
    mu_logp: torch.Tensor,
    adv: torch.Tensor,
    valid: torch.Tensor,
    *,
    delta: float = 0.1,
    divergence: Divergence = "tv",
    normalizer: float | None = None,
    backend: Backend = "auto",
) -> DppoOutput:
    """DPPO loss and trust-region statistics; see ``aes_kernels.reference``."""
    if use_triton(logp.device, backend):
        from aes_kernels.dppo_loss import dppo_loss_triton

        return dppo_loss_triton(logp, mu_logp, adv, valid, delta=delta, divergence=divergence, normalizer=normalizer)
    return dppo_loss_reference(logp, mu_logp, adv, valid, delta=delta, divergence=divergence, normalizer=normalizer)


__all__ = ["Backend", "Divergence", "DppoOutput", "dppo_objective", "token_logprobs", "use_triton"]
