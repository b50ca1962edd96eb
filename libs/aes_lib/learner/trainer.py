"""One DPPO update of a transformers causal LM.

Each assistant turn trains as the sequence ``prompt + completion``. The decoder's
last hidden states at the positions that predict completion tokens, with the
output projection's weight, go through the fused log-prob kernel (never the full
``[tokens, vocab]`` logits), then through the registered loss with the sampler's
stored log-probs as the anchor. Gradients accumulate over micro-batches that share
one normalizer (the batch's completion-token count); then one AdamW step. No KL or
entropy term. Each turn is scored at its sampling temperature (hidden states
divided by ``T`` are logits divided by ``T``: the output layer has no bias), so
``pi`` and the sampler's ``mu`` describe the same distribution.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from aes_kernels import token_logprobs
from aes_lib.learner.batcher import Batch
from aes_lib.learner.config import LearnerConfig
from aes_lib.learner.losses import get_loss
from aes_lib.learner.samples import TokenizedTurn


class UnsupportedModelError(ValueError):
    """A model whose logits are not ``hidden @ lm_head.weight.T`` (bias, soft-capping...)."""


@dataclass(frozen=True)
class StepStats:
    loss: float
    tokens: int
    """Completion tokens trained on."""
    masked_tokens: int
    """Tokens whose gradient the DPPO mask removed."""
    mask_fraction: float
    mean_divergence: float
    grad_norm: float


@dataclass(frozen=True)
class _Seq:
    turn: TokenizedTurn
    advantage: float

    @property
    def length(self) -> int:
        return len(self.turn.prompt_ids) + len(self.turn.completion_ids)


def _micro_batches(seqs: list[_Seq], max_tokens: int) -> list[list[_Seq]]:
    """Consecutive runs whose padded size (count x longest) stays within ``max_tokens``."""
    out: list[list[_Seq]] = []
    cur: list[_Seq] = []
    longest = 0
    for s in seqs:
        if cur and max(longest, s.length) * (len(cur) + 1) > max_tokens:
            out.append(cur)
            cur, longest = [], 0
        cur.append(s)
        longest = max(longest, s.length)
    if cur:
        out.append(cur)
    return out


class DppoTrainer:
    def __init__(self, model: torch.nn.Module, config: LearnerConfig) -> None:
        head = model.get_output_embeddings()
        if getattr(head, "bias", None) is not None:
            raise UnsupportedModelError("the output projection has a bias; the fused log-prob assumes none")
        if getattr(model.config, "final_logit_softcapping", None):
            raise UnsupportedModelError("logit soft-capping is not supported by the fused log-prob")
        self.model = model
        self.config = config
        self.loss_fn = get_loss(config.loss)
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        self.steps = 0

    def _device(self) -> torch.device:
        return self.model.get_output_embeddings().weight.device

    def _token_logprobs(self, seqs: list[_Seq]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Trainer log-probs, sampler log-probs and advantages of every completion token."""
        dev = self._device()
        width = max(s.length for s in seqs)
        ids = torch.zeros(len(seqs), width, dtype=torch.long)
        attn = torch.zeros(len(seqs), width, dtype=torch.long)
        rows, cols, targets, mu, adv, temp = [], [], [], [], [], []
        for i, s in enumerate(seqs):
            p, c = len(s.turn.prompt_ids), len(s.turn.completion_ids)
            ids[i, : p + c] = torch.tensor(s.turn.prompt_ids + s.turn.completion_ids)
            attn[i, : p + c] = 1
            rows += [i] * c
            cols += range(p - 1, p + c - 1)  # position t predicts token t + 1
            targets += s.turn.completion_ids
            mu += s.turn.sampler_logprobs
            adv += [s.advantage] * c
            temp += [s.turn.temperature or 1.0] * c
        hidden = self.model.get_decoder()(input_ids=ids.to(dev), attention_mask=attn.to(dev)).last_hidden_state
        h = hidden[torch.tensor(rows, device=dev), torch.tensor(cols, device=dev)]
        h = h / torch.tensor(temp, device=dev, dtype=h.dtype)[:, None]
        weight = self.model.get_output_embeddings().weight
        logp = token_logprobs(h, weight, torch.tensor(targets, device=dev), backend=self.config.kernel_backend)
        return logp, torch.tensor(mu, device=dev), torch.tensor(adv, device=dev)

    def step(self, batch: Batch) -> StepStats:
        seqs = [_Seq(t, a) for s, a in batch.samples for t in s.turns if t.completion_ids]
        n_tokens = sum(len(s.turn.completion_ids) for s in seqs)
        if not n_tokens:
            raise ValueError("batch has no completion tokens to train on")
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        loss_sum = masked = div_sum = 0.0
        for mb in _micro_batches(seqs, self.config.micro_batch_tokens):
            logp, mu, adv = self._token_logprobs(mb)
            out = self.loss_fn(logp, mu, adv, torch.ones_like(logp), delta=self.config.delta,
                               normalizer=n_tokens, backend=self.config.kernel_backend)
            out.loss.backward()
            loss_sum += out.loss.item()
            masked += out.masked_tokens.item()
            div_sum += out.mean_divergence.item() * logp.numel()
        params = [p for p in self.model.parameters() if p.grad is not None]
        max_norm = self.config.max_grad_norm or float("inf")
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, max_norm))
        self.optimizer.step()
        self.steps += 1
        return StepStats(loss_sum, n_tokens, int(masked), masked / n_tokens, div_sum / n_tokens, grad_norm)
