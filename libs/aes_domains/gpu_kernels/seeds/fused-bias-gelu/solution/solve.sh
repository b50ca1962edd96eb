#!/bin/bash
# Reference solution: one Triton program per (row, block of columns) loads x and the bias,
# adds and applies the erf GELU in float32 registers, and stores once.
set -euo pipefail
APP=${APP:-/app}
mkdir -p "$APP"
cat > "$APP/kernel.py" <<'PY'
"""Fused bias + exact GELU: one read of x, one write of the result."""

import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _bias_gelu(x_ptr, b_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    # axis 0 (the large grid axis): rows; axis 1: column blocks; no per-element modulo for the bias.
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    z = x + b
    y = 0.5 * z * (1.0 + tl.erf(z * 0.7071067811865476))
    tl.store(y_ptr + row * n_cols + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def bias_gelu(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.shape[-1]
    rows = x.numel() // n
    _bias_gelu[(rows, triton.cdiv(n, BLOCK))](x, bias.contiguous(), y, n, BLOCK=BLOCK, num_warps=4)
    return y
PY
chmod 0644 "$APP/kernel.py"
