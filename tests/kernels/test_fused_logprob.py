"""Fused Triton log-prob kernel against the torch reference: values and gradients.

fp32 only: the Triton interpreter computes a bf16 ``tl.dot`` wrongly (checked), so
bf16 is compared on a GPU by ``bench/gpu_kernels.sh``.
"""

import pytest
import torch

from aes_kernels import token_logprobs, use_triton
from aes_kernels.fused_logprob import token_logprobs_triton
from aes_kernels.reference import token_logprobs_reference

# (T, H, V): tile-aligned, ragged in every dimension, one token, and Qwen's 151,936 vocabulary.
SHAPES = [(16, 64, 4096), (5, 24, 100), (37, 70, 5003), (1, 16, 257), (16, 32, 151_936), (20, 72, 151_936)]


def _inputs(T, H, V, seed):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(T, H, generator=g)
    w = torch.randn(V, H, generator=g) * (2.0 / H**0.5)  # logits of spread ~2: a peaked softmax
    y = torch.randint(0, V, (T,), generator=g)
    return h, w, y, torch.randn(T, generator=g)


@pytest.mark.parametrize("T,H,V", SHAPES)
def test_values_and_grads_match_reference(T, H, V):
    h, w, y, g = _inputs(T, H, V, seed=T * 1000 + V)
    grads = []
    for fn in (token_logprobs_triton, token_logprobs_reference):
        hh, ww = h.clone().requires_grad_(), w.clone().requires_grad_()
        out = fn(hh, ww, y)
        (out * g).sum().backward()
        grads.append((out.detach(), hh.grad, ww.grad))
    (lp_k, dh_k, dw_k), (lp_r, dh_r, dw_r) = grads
    assert lp_k.dtype == torch.float32 and lp_k.shape == (T,)
    torch.testing.assert_close(lp_k, lp_r, atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(dh_k, dh_r, atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(dw_k, dw_r, atol=2e-6, rtol=1e-4)


def test_target_logit_dominates_gives_near_zero_logprob():
    # A token whose logit exceeds the rest by 50 has log-prob ~0; others ~-50.
    H, V = 16, 300
    w = torch.zeros(V, H)
    w[7, 0] = 50.0
    h = torch.zeros(3, H)
    h[:, 0] = 1.0
    out = token_logprobs_triton(h, w, torch.tensor([7, 8, 299]))
    assert out[0].item() == pytest.approx(0.0, abs=1e-5)
    assert out[1].item() == pytest.approx(-50.0, abs=1e-3)
    assert out[2].item() == pytest.approx(-50.0, abs=1e-3)


def test_non_contiguous_hidden_states():
    h, w, y, _ = _inputs(12, 32, 777, seed=3)
    wide = torch.cat([h, h], dim=1)[:, :32]  # row stride 64
    assert not wide.is_contiguous()
    torch.testing.assert_close(token_logprobs_triton(wide, w, y), token_logprobs_reference(h, w, y), atol=2e-5, rtol=1e-5)


def test_bad_inputs_raise_value_error():
    h, w, y, _ = _inputs(4, 16, 50, seed=1)
    with pytest.raises(ValueError, match="shape mismatch"):
        token_logprobs_triton(h, w[:, :8], y)
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 50\)"):
        token_logprobs_triton(h, w, torch.tensor([0, 1, 2, 50]))
    with pytest.raises(ValueError, match="share a dtype"):
        token_logprobs_triton(h, w.double(), y)


def test_dispatcher_picks_triton_under_interpreter_and_honours_override():
    assert use_triton(torch.device("cpu"))  # TRITON_INTERPRET=1 (conftest)
    assert not use_triton(torch.device("cpu"), "torch")
    assert use_triton(torch.device("cuda"), "auto")
    with pytest.raises(ValueError, match="backend must be"):
        use_triton(torch.device("cpu"), "cuda")  # type: ignore[arg-type]
    h, w, y, _ = _inputs(6, 16, 90, seed=2)
    torch.testing.assert_close(token_logprobs(h, w, y), token_logprobs(h, w, y, backend="torch"), atol=2e-5, rtol=1e-5)
