#!/bin/bash
# Reference solution: one Triton program per row loads the row once, reduces the sum of
# squares in float32 registers, and writes the scaled row: one read and one write of x.
set -euo pipefail
APP=${APP:-/app}
mkdir -p "$APP"
cat > "$APP/kernel.py" <<'PY'
"""Fused RMSNorm: one Triton program per row, the whole row held in registers."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_rows(x_ptr, w_ptr, y_ptr, x_row_stride, y_row_stride, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(y_ptr + row * y_row_stride + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    n = x.shape[-1]
    rows = x.reshape(-1, n)
    if rows.stride(-1) != 1:
        rows = rows.contiguous()
    y = torch.empty((rows.shape[0], n), dtype=x.dtype, device=x.device)
    block = triton.next_power_of_2(n)
    warps = min(max(block // 256, 1), 16)
    _rmsnorm_rows[(rows.shape[0],)](rows, weight.contiguous(), y, rows.stride(0), y.stride(0), n, eps,
                                    BLOCK=block, num_warps=warps)
    return y.reshape(x.shape)
PY
chmod 0644 "$APP/kernel.py"
