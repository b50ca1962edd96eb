"""Losses are typed plug-ins: the learner config names one and sets its hyper-parameters; a third
party's loss, registered in code or installed with an ``aes.losses`` entry point, trains a real
step of the tiny Llama and moves it the way that loss (not DPPO) says."""

from __future__ import annotations

import importlib

import pytest
import torch

from aes_lib.learner import (
    Batcher,
    DppoTrainer,
    LearnerConfig,
    LearnerConfigError,
    LossParamsError,
    Sample,
    TokenizedTurn,
    UnknownLossError,
    build_loss,
    loss_names,
    register_loss,
)
from aes_lib.learner.losses import DppoKL, DppoTV

from .helpers import BOS, EOS, SEP, tiny_llama

PLUGIN = '''
import dataclasses

import torch


@dataclasses.dataclass(frozen=True)
class LogLikelihood:
    """Raises (weight > 0) or lowers (weight < 0) the log-prob of every trained token, whatever its advantage."""

    weight: float = 1.0

    def __call__(self, logp, mu_logp, adv, valid, *, normalizer, backend):
        zero = torch.zeros((), device=logp.device)
        return Output(-self.weight * (logp * valid).sum() / normalizer, zero, zero)


@dataclasses.dataclass(frozen=True)
class Output:
    loss: torch.Tensor
    masked_tokens: torch.Tensor
    mean_divergence: torch.Tensor
'''
PROMPT, ANSWERS = (BOS, 3, SEP), ((4, EOS), (7, EOS))


def _plugin_module(tmp_path, monkeypatch):
    """The third party's package, importable from ``tmp_path`` as pip would leave it."""
    (tmp_path / "ext_losses.py").write_text(PLUGIN)
    info = tmp_path / "ext_losses-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ext-losses\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[aes.losses]\next_loglik = ext_losses:LogLikelihood\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return importlib.import_module("ext_losses")


def _completion_logp(model) -> float:
    """Mean log-prob the model gives the answers' tokens."""
    total, n = 0.0, 0
    with torch.no_grad():
        for answer in ANSWERS:
            ids = list(PROMPT + answer)
            lp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), -1)
            total += sum(lp[p - 1, ids[p]].item() for p in range(len(PROMPT), len(ids)))
            n += len(answer)
    return total / n


def _train_one_step(config: LearnerConfig) -> tuple[float, float, float]:
    """Log-prob of the answers before and after one step on a group (rewards 1 and 0), and the step's loss."""
    batcher = Batcher(config)
    for i, (answer, reward) in enumerate(zip(ANSWERS, (1.0, 0.0))):
        batcher.add(Sample(f"g-{i}", "g", "solver", reward, (TokenizedTurn(PROMPT, answer, (-2.7, -2.7)),)))
    batch = batcher.next_batch()
    assert batch is not None
    model = tiny_llama(seed=0)
    before = _completion_logp(model)
    stats = DppoTrainer(model, config).step(batch)
    return before, _completion_logp(model), stats.loss


def _config(loss: str, *params: str) -> LearnerConfig:
    return LearnerConfig(solver_group_size=2, groups_per_batch=1, lr=1e-2, loss=loss, loss_params=params)


def test_the_dppo_losses_take_their_own_parameters():
    assert build_loss("dppo_tv") == DppoTV(delta=0.1) and DppoTV.divergence == "tv"
    assert build_loss("dppo_kl", ["delta=0.05"]) == DppoKL(delta=0.05) and DppoKL.divergence == "kl"
    with pytest.raises(UnknownLossError, match="unknown loss 'ppo_clip'; registered: dppo_kl, dppo_tv"):
        build_loss("ppo_clip")
    with pytest.raises(LossParamsError, match="loss 'dppo_tv' has no parameter 'clip' \\(its parameters: delta\\)"):
        build_loss("dppo_tv", ["clip=0.2"])
    with pytest.raises(LossParamsError, match=r"Expected `float` > 0.0 - at `\$.delta`"):
        build_loss("dppo_kl", ["delta=0"])
    with pytest.raises(LearnerConfigError, match="unknown loss 'ppo_clip'; registered: .*dppo_tv"):
        _config("ppo_clip")


def test_a_registered_loss_trains_a_step_as_it_dictates(tmp_path, monkeypatch):
    register_loss("ext_loglik_registered", _plugin_module(tmp_path, monkeypatch).LogLikelihood)
    with pytest.raises(ValueError, match="already registered"):
        register_loss("dppo_tv", DppoKL)
    up_before, up_after, up_loss = _train_one_step(_config("ext_loglik_registered", "weight=1"))
    down_before, down_after, down_loss = _train_one_step(_config("ext_loglik_registered", "weight=-1"))
    # the step's loss is the plug-in's value on the untrained model, its sign set by `weight`
    assert up_loss == pytest.approx(-up_before, rel=1e-4) and down_loss == pytest.approx(down_before, rel=1e-4)
    # both answers rise (weight 1) or both fall (weight -1), although one was rewarded and one was not
    assert up_after > up_before + 0.01 and down_after < down_before - 0.01


def test_a_loss_installed_with_an_entry_point_is_found_by_name(tmp_path, monkeypatch):
    with pytest.raises(UnknownLossError):
        build_loss("ext_loglik")
    _plugin_module(tmp_path, monkeypatch)
    assert "ext_loglik" in loss_names()
    before, after, loss = _train_one_step(_config("ext_loglik", "weight=2"))
    assert loss == pytest.approx(-2 * before, rel=1e-4) and after > before + 0.01
    with pytest.raises(LearnerConfigError, match="loss 'ext_loglik' has no parameter 'delta' \\(its parameters: weight\\)"):
        _config("ext_loglik", "delta=0.1")


def test_the_old_delta_variable_is_refused_not_ignored(monkeypatch):
    monkeypatch.setenv("AES_LEARNER_DELTA", "0.2")
    with pytest.raises(LearnerConfigError, match="AES_LEARNER_LOSS_PARAMS=delta=<value>"):
        LearnerConfig.from_env()
    monkeypatch.delenv("AES_LEARNER_DELTA")
    monkeypatch.setenv("AES_LEARNER_LOSS_PARAMS", "delta=0.2")
    assert build_loss(LearnerConfig.from_env().loss, LearnerConfig.from_env().loss_params) == DppoTV(delta=0.2)
