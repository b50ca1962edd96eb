"""Torch reference of the DPPO math: the specification the Triton kernels must match.

Two pieces:

* ``token_logprobs_reference``: log-prob of each sampled token from the last hidden
  states ``h [T, H]`` and the output projection ``W [V, H]``, i.e.
  ``log_softmax(h @ W.T)[t, y_t]``. Materializes the full ``[T, V]`` logits.
* ``dppo_loss_reference``: the DPPO objective (arXiv 2602.04879). With ``pi`` the
  trainer's and ``mu`` the sampler's probability of the sampled token,
  ``r = pi / mu``, divergence ``D = |pi - mu|`` (binary TV) or the binary KL,
  trust-region mask ``M = 0`` where the update would push further out of the region
  (``A > 0, pi > mu, D > delta`` or ``A < 0, pi < mu, D > delta``), else 1, without
  gradient, and ``L = -(1 / N) * sum_t M_t r_t A_t`` with ``N`` the number of
  completion tokens in the batch (token-level normalization). No ratio clipping.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

Divergence = Literal["tv", "kl"]

KL_EPS = 1e-6
"""Probabilities are clamped to [eps, 1 - eps] before the binary KL's logarithms."""


@dataclass(frozen=True)
class DppoOutput:
    """The loss and the trust-region statistics of one batch."""

    loss: torch.Tensor
    """Scalar loss (differentiable w.r.t. the trainer log-probs)."""
    masked_tokens: torch.Tensor
    """Number of valid tokens whose gradient the mask removed (scalar, no grad)."""
    mask_fraction: torch.Tensor
    """``masked_tokens`` over the number of valid tokens."""
    mean_divergence: torch.Tensor
    """Mean of ``D`` over the valid tokens."""


def token_logprobs_reference(h: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``log_softmax(h @ w.T)[t, y[t]]`` in fp32; ``h [T, H]``, ``w [V, H]``, ``y [T]`` -> ``[T]``."""
    logits = h.float() @ w.float().T  # fp32 products of 16-bit inputs, as the kernel's fp32 accumulator
    return logits.log_softmax(-1).gather(1, y.long()[:, None]).squeeze(1)


def binary_divergence(p: torch.Tensor, q: torch.Tensor, kind: Divergence) -> torch.Tensor:
    """Divergence between Bernoulli(q) (sampler) and Bernoulli(p) (trainer) of the sampled token.

    ``tv``: ``|p - q|``; ``kl``: ``KL(q || p)``, the sampler's distribution against the trainer's.
    """
    if kind == "tv":
        return (p - q).abs()
    if kind == "kl":
        p = p.clamp(KL_EPS, 1 - KL_EPS)
        q = q.clamp(KL_EPS, 1 - KL_EPS)
        return q * (q / p).log() + (1 - q) * ((1 - q) / (1 - p)).log()
    raise ValueError(f"divergence must be 'tv' or 'kl', got {kind!r}")


def trust_region_mask(
    logp: torch.Tensor, mu_logp: torch.Tensor, adv: torch.Tensor, delta: float, kind: Divergence
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(M, D)``: the keep-mask (1 keep, 0 drop) and the divergence, both without gradient."""
    with torch.no_grad():
        p, q = logp.float().exp(), mu_logp.float().exp()
        d = binary_divergence(p, q, kind)
        drop = ((adv > 0) & (p > q) & (d > delta)) | ((adv < 0) & (p < q) & (d > delta))
    return (~drop).float(), d


def dppo_loss_reference(
    logp: torch.Tensor,
    mu_logp: torch.Tensor,
    adv: torch.Tensor,
    valid: torch.Tensor,
    *,
    delta: float = 0.1,
    divergence: Divergence = "tv",
    normalizer: float | None = None,
) -> DppoOutput:
    """DPPO loss over flat token tensors ``[N]``.

    ``valid`` is 1 for completion tokens and 0 for padding; ``normalizer`` defaults to
    ``valid.sum()`` (pass the whole batch's token count when splitting it in micro-batches).
    """
    valid = valid.float()
    n_valid = valid.sum()
    norm = n_valid.clamp_min(1.0) if normalizer is None else float(normalizer)
    m, d = trust_region_mask(logp, mu_logp, adv, delta, divergence)
    ratio = (logp.float() - mu_logp.float()).exp()
    loss = -(m * ratio * adv.float() * valid).sum() / norm
    masked = ((1 - m) * valid).sum()
    denom = n_valid.clamp_min(1.0)
    return DppoOutput(loss, masked, masked / denom, (d * valid).sum() / denom)
