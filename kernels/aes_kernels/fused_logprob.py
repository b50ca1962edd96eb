"""Fused sampled-token log-prob: ``log_softmax(h @ W.T)[t, y_t]`` without the ``[T, V]`` logits.

Forward: each program owns ``BLOCK_T`` tokens and sweeps the vocabulary in
``BLOCK_V`` chunks, computing a logits tile (``tl.dot`` over ``BLOCK_H`` slices of
the hidden size), folding it into an online logsumexp and picking the target's
logit. Only the per-token log-prob and logsumexp are written.

Backward: ``d logits = g * (onehot(y) - softmax)``; a 2-D grid of (token block,
vocabulary chunk) recomputes its logits tile from ``h``, ``W`` and the saved
logsumexp, then adds its share of ``dh = dlogits @ W`` and ``dW = dlogits.T @ h``
with fp32 atomics. Peak extra memory is the fp32 gradient buffers, never ``T x V``.
Row offsets are widened to int64: ``V x H`` passes 2**31 elements for large models.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl


@triton.jit
def _logits_tile(h_ptr, w_ptr, rows, cols, row_ok, col_ok, H, stride_h, stride_w,
                 BLOCK_T: tl.constexpr, BLOCK_V: tl.constexpr, BLOCK_H: tl.constexpr,
                 PRECISION: tl.constexpr):
    acc = tl.zeros([BLOCK_T, BLOCK_V], dtype=tl.float32)
    for k0 in range(0, H, BLOCK_H):
        ks = k0 + tl.arange(0, BLOCK_H)
        k_ok = ks < H
        hb = tl.load(h_ptr + rows[:, None].to(tl.int64) * stride_h + ks[None, :],
                     mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        wb = tl.load(w_ptr + cols[:, None].to(tl.int64) * stride_w + ks[None, :],
                     mask=col_ok[:, None] & k_ok[None, :], other=0.0)
        acc = tl.dot(hb, tl.trans(wb), acc, input_precision=PRECISION)
    return acc


@triton.jit
def _fwd_kernel(h_ptr, w_ptr, y_ptr, logp_ptr, lse_ptr, T, V, H, stride_h, stride_w,
                BLOCK_T: tl.constexpr, BLOCK_V: tl.constexpr, BLOCK_H: tl.constexpr,
                PRECISION: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    row_ok = rows < T
    y = tl.load(y_ptr + rows, mask=row_ok, other=-1)
    m = tl.full([BLOCK_T], float("-inf"), dtype=tl.float32)
    s = tl.zeros([BLOCK_T], dtype=tl.float32)
    target = tl.zeros([BLOCK_T], dtype=tl.float32)
    for v0 in range(0, V, BLOCK_V):
        cols = v0 + tl.arange(0, BLOCK_V)
        col_ok = cols < V
        logits = _logits_tile(h_ptr, w_ptr, rows, cols, row_ok, col_ok, H, stride_h, stride_w,
                              BLOCK_T, BLOCK_V, BLOCK_H, PRECISION)
        logits = tl.where(col_ok[None, :], logits, float("-inf"))
        m_new = tl.maximum(m, tl.max(logits, axis=1))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(logits - m_new[:, None]), axis=1)
        m = m_new
        target += tl.sum(tl.where(cols[None, :] == y[:, None], logits, 0.0), axis=1)
    lse = m + tl.log(s)
    tl.store(logp_ptr + rows, target - lse, mask=row_ok)
    tl.store(lse_ptr + rows, lse, mask=row_ok)


@triton.jit
def _bwd_kernel(h_ptr, w_ptr, y_ptr, lse_ptr, g_ptr, dh_ptr, dw_ptr, T, V, H, stride_h, stride_w,
                BLOCK_T: tl.constexpr, BLOCK_V: tl.constexpr, BLOCK_H: tl.constexpr,
                PRECISION: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = tl.program_id(1) * BLOCK_V + tl.arange(0, BLOCK_V)
    row_ok = rows < T
    col_ok = cols < V
    y = tl.load(y_ptr + rows, mask=row_ok, other=-1)
    lse = tl.load(lse_ptr + rows, mask=row_ok, other=0.0)
    g = tl.load(g_ptr + rows, mask=row_ok, other=0.0)
    logits = _logits_tile(h_ptr, w_ptr, rows, cols, row_ok, col_ok, H, stride_h, stride_w,
                          BLOCK_T, BLOCK_V, BLOCK_H, PRECISION)
    prob = tl.where(col_ok[None, :], tl.exp(logits - lse[:, None]), 0.0)
    onehot = tl.where(cols[None, :] == y[:, None], 1.0, 0.0)
    dlogits = (g[:, None] * (onehot - prob)).to(h_ptr.dtype.element_ty)
    for k0 in range(0, H, BLOCK_H):
        ks = k0 + tl.arange(0, BLOCK_H)
        k_ok = ks < H
        wb = tl.load(w_ptr + cols[:, None].to(tl.int64) * stride_w + ks[None, :],
                     mask=col_ok[:, None] & k_ok[None, :], other=0.0)
        dh = tl.dot(dlogits, wb, input_precision=PRECISION)
        tl.atomic_add(dh_ptr + rows[:, None].to(tl.int64) * H + ks[None, :], dh,
                      mask=row_ok[:, None] & k_ok[None, :])
        hb = tl.load(h_ptr + rows[:, None].to(tl.int64) * stride_h + ks[None, :],
                     mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        dw = tl.dot(tl.trans(dlogits), hb, input_precision=PRECISION)
        tl.atomic_add(dw_ptr + cols[:, None].to(tl.int64) * H + ks[None, :], dw,
                      mask=col_ok[:, None] & k_ok[None, :])


def _blocks(device: torch.device) -> tuple[int, int, int]:
    """(BLOCK_T, BLOCK_V, BLOCK_H). The interpreter runs programs one by one in numpy,
    so it wants few, large tiles; a GPU wants tiles that fit in shared memory."""
    if device.type == "cpu" or os.environ.get("TRITON_INTERPRET") == "1":
        return 16, 4096, 64
    return 64, 128, 64


def _precision(dtype: torch.dtype) -> str:
    # fp32 inputs keep full fp32 products (what the torch reference computes); 16-bit
    # inputs use the tensor cores natively.
    return "ieee" if dtype == torch.float32 else "tf32"


def _check(h: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> None:
    if h.dim() != 2 or w.dim() != 2 or y.dim() != 1:
        raise ValueError(f"expected h [T, H], w [V, H], y [T]; got {tuple(h.shape)}, {tuple(w.shape)}, {tuple(y.shape)}")
    if h.shape[1] != w.shape[1] or h.shape[0] != y.shape[0]:
        raise ValueError(f"shape mismatch: h {tuple(h.shape)}, w {tuple(w.shape)}, y {tuple(y.shape)}")
    if h.dtype != w.dtype:
        raise ValueError(f"h and w must share a dtype, got {h.dtype} and {w.dtype}")
    if y.numel() and (int(y.min()) < 0 or int(y.max()) >= w.shape[0]):
        raise ValueError(f"token ids must lie in [0, {w.shape[0]}), got [{int(y.min())}, {int(y.max())}]")


class FusedTokenLogprob(torch.autograd.Function):
    """Autograd wrapper: gradients w.r.t. ``h`` and ``W``; ``y`` is an index."""

    @staticmethod
    def forward(ctx, h: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        _check(h, w, y)
        h, w, y = h.contiguous(), w.contiguous(), y.contiguous().to(torch.int64)
        T, H = h.shape
        V = w.shape[0]
        logp = torch.empty(T, device=h.device, dtype=torch.float32)
        lse = torch.empty(T, device=h.device, dtype=torch.float32)
        bt, bv, bh = _blocks(h.device)
        if T:
            _fwd_kernel[(triton.cdiv(T, bt),)](h, w, y, logp, lse, T, V, H, h.stride(0), w.stride(0),
                                               BLOCK_T=bt, BLOCK_V=bv, BLOCK_H=bh,
                                               PRECISION=_precision(h.dtype))
        ctx.save_for_backward(h, w, y, lse)
        return logp

    @staticmethod
    def backward(ctx, grad_logp: torch.Tensor):
        h, w, y, lse = ctx.saved_tensors
        T, H = h.shape
        V = w.shape[0]
        dh = torch.zeros(T, H, device=h.device, dtype=torch.float32)
        dw = torch.zeros(V, H, device=h.device, dtype=torch.float32)
        bt, bv, bh = _blocks(h.device)
        if T:
            grid = (triton.cdiv(T, bt), triton.cdiv(V, bv))
            _bwd_kernel[grid](h, w, y, lse, grad_logp.contiguous().float(), dh, dw, T, V, H,
                              h.stride(0), w.stride(0), BLOCK_T=bt, BLOCK_V=bv, BLOCK_H=bh,
                              PRECISION=_precision(h.dtype))
        return dh.to(h.dtype), dw.to(w.dtype), None


def token_logprobs_triton(h: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Fused ``log_softmax(h @ w.T)[t, y[t]]`` -> fp32 ``[T]``; differentiable in ``h`` and ``w``."""
    return FusedTokenLogprob.apply(h, w, y)
