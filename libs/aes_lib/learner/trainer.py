"""One DPPO update of a transformers causal LM, in one process or as one rank of many.

A sample's turns become training sequences (``sequences.pack_turns``: turns that extend
each other are one sequence). The model's own forward runs with its output layer
swapped for ``head.LogprobHead``, which turns the last hidden states at the positions
predicting completion tokens into their log-probs through the fused kernel (never the
full ``[tokens, vocab]`` logits); then the registered loss with the sampler's stored
log-probs as the anchor. Gradients accumulate over micro-batches sharing one normalizer
(the whole batch's completion-token count); then one AdamW step. No KL or entropy term.
Each token is scored at its turn's sampling temperature (hidden states divided by ``T``
are logits divided by ``T``: the output layer has no bias).

Under ``torch.distributed`` each rank trains its share of the batch (``split_across``)
on the FSDP2-sharded model: every rank runs the same number of micro-batches (a rank
short of work runs an empty one, so the collectives line up), the loss is scaled by the
world size because FSDP averages gradients, and the statistics are summed over ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from aes_lib.learner.batcher import Batch
from aes_lib.learner.config import LearnerConfig
from aes_lib.learner.head import Targets, UnsupportedModelError, install_head
from aes_lib.learner.losses import build_loss
from aes_lib.learner.sequences import TrainSeq, micro_batches, pack_turns, split_across

__all__ = ["DppoTrainer", "Plan", "StepStats", "UnsupportedModelError", "batch_sequences"]

_EMPTY = TrainSeq((0, 0), (1,), (-1.0,), (1.0,), 0.0)
"""What a rank without work forwards (weight 0) so that its collectives match the others'."""


@dataclass(frozen=True)
class StepStats:
    loss: float
    tokens: int
    """Completion tokens trained on."""
    masked_tokens: int
    """Tokens whose gradient the loss's trust region (DPPO's mask) removed."""
    mask_fraction: float
    mean_divergence: float
    grad_norm: float
    sequence_tokens: int = 0
    """Tokens forwarded (prompts, context and completions of every training sequence)."""


@dataclass(frozen=True)
class Plan:
    """One update as every rank needs it: its share, the batch's token count, the micro-batch count."""

    shares: list[list[TrainSeq]]
    n_tokens: int
    n_micro: int


def batch_sequences(batch: Batch, merge: bool = True) -> list[TrainSeq]:
    return [s for sample, adv in batch.samples for s in pack_turns(sample.turns, adv, merge)]


def _world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class DppoTrainer:
    """Trains ``model`` (plain, or already ``fully_shard``-ed by ``distributed.shard_model``)."""

    def __init__(self, model: torch.nn.Module, config: LearnerConfig) -> None:
        self.head = install_head(model, config.kernel_backend)
        self.model = model
        self.config = config
        self.loss = build_loss(config.loss, config.loss_params)
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay,
                                           eps=config.adam_eps)
        self.steps = 0

    def _device(self) -> torch.device:
        w = self.head.weight
        return torch.device(w.device_mesh.device_type) if hasattr(w, "device_mesh") else w.device

    def plan(self, batch: Batch, world: int | None = None) -> Plan:
        seqs = batch_sequences(batch, self.config.merge_turns)
        n_tokens = sum(s.n_targets for s in seqs)
        if not n_tokens:
            raise ValueError("batch has no completion tokens to train on")
        shares = split_across(seqs, world or _world()[1])
        n_micro = max(len(micro_batches(s, self.config.micro_batch_tokens)) for s in shares)
        return Plan(shares, n_tokens, max(n_micro, 1))

    def _token_logprobs(self, seqs: list[TrainSeq]) -> tuple[torch.Tensor, ...]:
        """Trainer log-probs, sampler log-probs, advantages and validity of every target token."""
        dev = self._device()
        width = max(s.length for s in seqs)
        ids = torch.zeros(len(seqs), width, dtype=torch.long)
        attn = torch.zeros(len(seqs), width, dtype=torch.long)
        rows, cols, tokens, mu, adv, temp = [], [], [], [], [], []
        for i, s in enumerate(seqs):
            ids[i, : s.length] = torch.tensor(s.ids)
            attn[i, : s.length] = 1
            rows += [i] * s.n_targets
            cols += [p - 1 for p in s.targets]  # position t predicts token t + 1
            tokens += [s.ids[p] for p in s.targets]
            mu += s.logprobs
            adv += [s.advantage] * s.n_targets
            temp += s.temperatures
        valid = torch.tensor([0.0 if s is _EMPTY else 1.0 for s in seqs for _ in s.targets], device=dev)
        self.head.targets = Targets(torch.tensor(rows, device=dev), torch.tensor(cols, device=dev),
                                    torch.tensor(tokens, device=dev), torch.tensor(temp, device=dev))
        try:
            logp = self.model(input_ids=ids.to(dev), attention_mask=attn.to(dev), use_cache=False).logits
        finally:
            self.head.targets = None
        return logp, torch.tensor(mu, device=dev), torch.tensor(adv, device=dev), valid

    def step(self, batch: Batch) -> StepStats:
        """The whole update in one process (or rank 0's plan run by every rank with its share)."""
        plan = self.plan(batch)
        return self.step_share(plan.shares[_world()[0]], plan.n_tokens, plan.n_micro)

    def step_share(self, seqs: list[TrainSeq], n_tokens: int, n_micro: int) -> StepStats:
        """This rank's part of one update; every rank calls it with its share of the same plan."""
        return self.step_micro(micro_batches(seqs, self.config.micro_batch_tokens), n_tokens, n_micro)

    def step_micro(self, micro: list[list[TrainSeq]], n_tokens: int, n_micro: int) -> StepStats:
        """This rank's part of one update, already cut into micro-batches (a packed share); every
        rank runs ``n_micro`` of them (the busiest rank's count)."""
        _, world = _world()
        mbs = list(micro) + [[_EMPTY]] * (n_micro - len(micro))
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        dev = self._device()
        sums = torch.zeros(4, dtype=torch.float64, device=dev)  # loss, masked tokens, divergence sum, forwarded tokens
        for mb in mbs:
            logp, mu, adv, valid = self._token_logprobs(mb)
            out = self.loss(logp, mu, adv, valid, normalizer=n_tokens, backend=self.config.kernel_backend)
            (out.loss * world).backward()  # FSDP averages gradients over ranks; the loss is a sum
            n_valid = float(valid.sum())
            sums += torch.tensor([out.loss.item(), out.masked_tokens.item(), out.mean_divergence.item() * n_valid,
                                  sum(s.length for s in mb if s is not _EMPTY)], dtype=torch.float64, device=dev)
        if world > 1:
            dist.all_reduce(sums)
        params = [p for p in self.model.parameters() if p.grad is not None]
        max_norm = self.config.max_grad_norm or float("inf")
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        grad_norm = float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)
        self.optimizer.step()
        self.steps += 1
        loss, masked, div, forwarded = sums.tolist()
        return StepStats(loss, n_tokens, int(masked), masked / n_tokens, div / n_tokens, grad_norm, int(forwarded))
