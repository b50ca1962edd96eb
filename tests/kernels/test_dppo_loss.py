"""DPPO mask and loss: Triton kernel against the reference, and the mask in each sign case."""

import math

import pytest
import torch

from aes_kernels.dppo_loss import dppo_loss_triton
from aes_kernels.reference import dppo_loss_reference

IMPLS = {"triton": dppo_loss_triton, "torch": dppo_loss_reference}


def _random(n, seed):
    g = torch.Generator().manual_seed(seed)
    mu = -torch.rand(n, generator=g) * 3  # sampler log-probs in (-3, 0]
    logp = (mu + torch.randn(n, generator=g) * 0.4).clamp(max=0.0)
    adv = torch.randn(n, generator=g)
    valid = (torch.rand(n, generator=g) > 0.2).float()
    return logp, mu, adv, valid


@pytest.mark.parametrize("n", [1, 7, 1024, 3001])
@pytest.mark.parametrize("divergence,delta", [("tv", 0.1), ("kl", 0.05)])
def test_kernel_matches_reference_values_grads_and_stats(n, divergence, delta):
    logp, mu, adv, valid = _random(n, seed=n)
    outs, grads = [], []
    for fn in (dppo_loss_triton, dppo_loss_reference):
        x = logp.clone().requires_grad_()
        out = fn(x, mu, adv, valid, delta=delta, divergence=divergence)
        out.loss.backward()
        outs.append(out)
        grads.append(x.grad)
    k, r = outs
    torch.testing.assert_close(k.loss, r.loss, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(grads[0], grads[1], atol=1e-6, rtol=1e-5)
    assert k.masked_tokens.item() == r.masked_tokens.item()
    torch.testing.assert_close(k.mask_fraction, r.mask_fraction)
    torch.testing.assert_close(k.mean_divergence, r.mean_divergence, atol=1e-6, rtol=1e-5)
    if n >= 1024:
        assert 0 < r.masked_tokens.item() < valid.sum().item()  # the comparison exercised both branches


def _case(p, mu, a):
    return torch.tensor([math.log(p)]), torch.tensor([math.log(mu)]), torch.tensor([a])


# (trainer prob, sampler prob, advantage, kept?)
SIGN_CASES = [
    (0.60, 0.40, +1.0, False),  # A > 0 and pi - mu > delta: pushing further up is masked
    (0.40, 0.60, +1.0, True),  # A > 0 but pi moved down: the update pulls back, kept
    (0.40, 0.60, -1.0, False),  # A < 0 and mu - pi > delta: pushing further down is masked
    (0.60, 0.40, -1.0, True),  # A < 0 but pi moved up: kept
    (0.45, 0.40, +1.0, True),  # inside the region (|pi - mu| = 0.05 <= 0.1): kept
    (0.35, 0.40, -1.0, True),
    (0.90, 0.30, 0.0, True),  # zero advantage is never masked (and contributes nothing)
]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("p,mu,a,kept", SIGN_CASES)
def test_mask_in_each_sign_case(impl, p, mu, a, kept):
    logp, mu_logp, adv = _case(p, mu, a)
    x = logp.clone().requires_grad_()
    out = IMPLS[impl](x, mu_logp, adv, torch.ones(1), delta=0.1)
    out.loss.backward()
    ratio = p / mu
    assert out.masked_tokens.item() == (0 if kept else 1)
    assert out.mean_divergence.item() == pytest.approx(abs(p - mu), abs=1e-6)
    # Kept: L = -r A, dL/dlogp = -r A (no clipping however far r is from 1). Masked: no loss, no grad.
    expected = -ratio * a if kept else 0.0
    assert out.loss.item() == pytest.approx(expected, rel=1e-5, abs=1e-7)
    assert x.grad.item() == pytest.approx(expected, rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("impl", IMPLS)
def test_token_level_normalization_and_padding(impl):
    # Two kept tokens with ratio 1 and one padding token: L = -(a0 + a1) / 2, padding ignored.
    logp = torch.log(torch.tensor([0.5, 0.2, 0.9]))
    adv = torch.tensor([1.0, -3.0, 100.0])
    valid = torch.tensor([1.0, 1.0, 0.0])
    out = IMPLS[impl](logp, logp.clone(), adv, valid)
    assert out.loss.item() == pytest.approx(1.0)
    assert out.mask_fraction.item() == 0.0
    # A caller splitting a batch passes the whole batch's token count.
    out = IMPLS[impl](logp, logp.clone(), adv, valid, normalizer=8)
    assert out.loss.item() == pytest.approx(2.0 / 8)


@pytest.mark.parametrize("impl", IMPLS)
def test_binary_kl_divergence_value(impl):
    logp, mu_logp, adv = _case(0.5, 0.2, 1.0)
    out = IMPLS[impl](logp, mu_logp, adv, torch.ones(1), delta=1.0, divergence="kl")
    expected = 0.2 * math.log(0.2 / 0.5) + 0.8 * math.log(0.8 / 0.5)
    assert out.mean_divergence.item() == pytest.approx(expected, rel=1e-5)
    assert out.masked_tokens.item() == 0  # KL 0.19 < delta 1.0


@pytest.mark.parametrize("impl", IMPLS)
def test_unknown_divergence_raises(impl):
    logp, mu_logp, adv = _case(0.5, 0.2, 1.0)
    with pytest.raises(ValueError, match="divergence must be 'tv' or 'kl'"):
        IMPLS[impl](logp, mu_logp, adv, torch.ones(1), divergence="js")


def test_dispatcher_survives_the_kernel_submodule_import():
    import aes_kernels
    import aes_kernels.dppo_loss  # noqa: F401  (sets the package attribute of that name)

    logp, mu_logp, adv = _case(0.45, 0.40, 1.0)
    for backend in ("triton", "torch"):
        out = aes_kernels.dppo_objective(logp, mu_logp, adv, torch.ones(1), backend=backend)
        assert out.loss.item() == pytest.approx(-0.45 / 0.40, rel=1e-5)


@pytest.mark.parametrize("name,divergence", [("dppo_tv", "tv"), ("dppo_kl", "kl")])
def test_the_learner_losses_reach_the_kernel_and_the_reference_with_their_delta(name, divergence):
    """The registered DPPO losses compute through ``aes_kernels``: the Triton kernel and the torch
    reference, each with the loss's own ``delta`` (a different one masks a different count)."""
    from aes_lib.learner import build_loss

    logp, mu, adv, valid = _random(1024, seed=3)
    for delta in (0.02, 0.2):
        loss = build_loss(name, [f"delta={delta}"])
        want = dppo_loss_reference(logp, mu, adv, valid, delta=delta, divergence=divergence, normalizer=2048.0)
        for backend in ("triton", "torch"):
            got = loss(logp, mu, adv, valid, normalizer=2048.0, backend=backend)
            torch.testing.assert_close(got.loss, want.loss, atol=1e-6, rtol=1e-5)
            assert got.masked_tokens.item() == want.masked_tokens.item()
    masked = [build_loss(name, [f"delta={d}"])(logp, mu, adv, valid, normalizer=1.0, backend="torch").masked_tokens.item()
              for d in (0.02, 0.2)]
    assert masked[0] > masked[1]
