"""DPPO trust-region mask and loss as one Triton pass over the tokens, with backward.

Forward: each program takes ``BLOCK`` tokens, computes ratio, divergence and mask,
and writes three partial sums (loss, masked tokens, divergence) to its own slot;
torch sums the slots (deterministic, no atomics). Backward recomputes the mask from
the same inputs: ``dL/dlogp_t = -g * M_t * r_t * A_t * valid_t / N`` (``dr/dlogp = r``).
The math is ``reference.dppo_loss_reference``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from aes_kernels.reference import KL_EPS, Divergence, DppoOutput

_BLOCK = 1024


@triton.jit
def _mask_terms(logp_ptr, mu_ptr, adv_ptr, valid_ptr, offs, ok, delta, KL: tl.constexpr):
    lp = tl.load(logp_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    ml = tl.load(mu_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    a = tl.load(adv_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    valid = tl.load(valid_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    p = tl.exp(lp)
    q = tl.exp(ml)
    if KL:
        pc = tl.minimum(tl.maximum(p, KL_EPS), 1.0 - KL_EPS)
        qc = tl.minimum(tl.maximum(q, KL_EPS), 1.0 - KL_EPS)
        d = qc * tl.log(qc / pc) + (1.0 - qc) * tl.log((1.0 - qc) / (1.0 - pc))
    else:
        d = tl.abs(p - q)
    drop = ((a > 0) & (p > q) & (d > delta)) | ((a < 0) & (p < q) & (d > delta))
    keep = tl.where(drop, 0.0, 1.0)
    ratio = tl.exp(lp - ml)
    return keep, ratio, a, valid, d


@triton.jit
def _fwd_kernel(logp_ptr, mu_ptr, adv_ptr, valid_ptr, partial_ptr, N, delta, inv_norm,
                KL: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    ok = offs < N
    keep, ratio, a, valid, d = _mask_terms(logp_ptr, mu_ptr, adv_ptr, valid_ptr, offs, ok, delta, KL)
    tl.store(partial_ptr + pid * 3 + 0, -tl.sum(keep * ratio * a * valid, axis=0) * inv_norm)
    tl.store(partial_ptr + pid * 3 + 1, tl.sum((1.0 - keep) * valid, axis=0))
    tl.store(partial_ptr + pid * 3 + 2, tl.sum(d * valid, axis=0))


@triton.jit
def _bwd_kernel(logp_ptr, mu_ptr, adv_ptr, valid_ptr, grad_ptr, out_ptr, N, delta, inv_norm,
                KL: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < N
    keep, ratio, a, valid, d = _mask_terms(logp_ptr, mu_ptr, adv_ptr, valid_ptr, offs, ok, delta, KL)
    g = tl.load(grad_ptr)
    tl.store(out_ptr + offs, -g * keep * ratio * a * valid * inv_norm, mask=ok)


class _DppoLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logp, mu_logp, adv, valid, delta: float, kl: bool, normalizer: float | None):
        n = logp.numel()
        tensors = [t.contiguous().float() for t in (logp, mu_logp, adv, valid)]
        n_valid = float(tensors[3].sum())
        norm = max(n_valid, 1.0) if normalizer is None else float(normalizer)
        blocks = triton.cdiv(n, _BLOCK)
        partial = torch.zeros(max(blocks, 1), 3, device=logp.device, dtype=torch.float32)
        if n:
            _fwd_kernel[(blocks,)](*tensors, partial, n, delta, 1.0 / norm, KL=kl, BLOCK=_BLOCK)
        sums = partial.sum(0)
        ctx.save_for_backward(*tensors)
        ctx.args = (n, delta, 1.0 / norm, kl)
        denom = max(n_valid, 1.0)
        stats = (sums[1], sums[2] / denom, sums[1] / denom)
        ctx.mark_non_differentiable(*stats)
        return (sums[0], *stats)

    @staticmethod
    def backward(ctx, grad_loss, *_stats):
        logp, mu, adv, valid = ctx.saved_tensors
        n, delta, inv_norm, kl = ctx.args
        grad = torch.empty_like(logp)
        if n:
            _bwd_kernel[(triton.cdiv(n, _BLOCK),)](logp, mu, adv, valid, grad_loss.reshape(1).float(),
                                                   grad, n, delta, inv_norm, KL=kl, BLOCK=_BLOCK)
        return grad, None, None, None, None, None, None


def dppo_loss_triton(
    logp: torch.Tensor,
    mu_logp: torch.Tensor,
    adv: torch.Tensor,
    valid: torch.Tensor,
    *,
    delta: float = 0.1,
    divergence: Divergence = "tv",
    normalizer: float | None = None,
) -> DppoOutput:
    """Same contract as ``reference.dppo_loss_reference``, computed by the Triton kernels."""
    if divergence not in ("tv", "kl"):
        raise ValueError(f"divergence must be 'tv' or 'kl', got {divergence!r}")
    loss, masked, mean_div, frac = _DppoLoss.apply(
        logp, mu_logp, adv, valid, float(delta), divergence == "kl", normalizer
    )
    return DppoOutput(loss, masked, frac, mean_div)
