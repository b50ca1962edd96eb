"""The output layer as a log-prob module: sampled-token log-probs instead of ``[tokens, vocab]`` logits.

``install_head(model)`` swaps the model's output projection for a ``LogprobHead`` that
holds the very same weight ``Parameter`` (tied embeddings stay tied, the state dict keeps
its names). The trainer binds the positions and targets of a micro-batch and calls the
model's own ``forward``: the head then receives the last hidden states from inside that
forward, so FSDP's pre-forward and post-backward hooks on the root module run (unsharding
the weight, reducing its gradient), and returns the fused kernel's log-probs. Unbound, it
is an ordinary linear layer (a plain forward still yields logits).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from aes_kernels import Backend, token_logprobs


class UnsupportedModelError(ValueError):
    """A model whose logits are not ``hidden @ lm_head.weight.T`` (bias, soft-capping...)."""


@dataclass(frozen=True)
class Targets:
    """Where the trained tokens are in a ``[B, S]`` micro-batch and how to score them."""

    rows: torch.Tensor
    cols: torch.Tensor
    """Positions whose hidden state predicts each target (target position - 1)."""
    tokens: torch.Tensor
    temperatures: torch.Tensor


class LogprobHead(torch.nn.Module):
    def __init__(self, weight: torch.nn.Parameter, backend: Backend = "auto") -> None:
        super().__init__()
        self.weight = weight
        self.backend: Backend = backend
        self.targets: Targets | None = None

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        if self.targets is None:
            return torch.nn.functional.linear(hidden, self.weight)
        t = self.targets
        # Scale in fp32, then back to the compute dtype the kernel shares with the weight.
        h = (hidden[t.rows, t.cols].float() / t.temperatures[:, None]).to(self.weight.dtype)
        return token_logprobs(h, self.weight, t.tokens, backend=self.backend)


def install_head(model: torch.nn.Module, backend: Backend = "auto") -> LogprobHead:
    """Replace ``model``'s output projection by a ``LogprobHead`` on the same weight (idempotent)."""
    head = model.get_output_embeddings()
    if isinstance(head, LogprobHead):
        head.backend = backend
        return head
    if getattr(head, "bias", None) is not None:
        raise UnsupportedModelError("the output projection has a bias; the fused log-prob assumes none")
    if getattr(model.config, "final_logit_softcapping", None):
        raise UnsupportedModelError("logit soft-capping is not supported by the fused log-prob")
    new = LogprobHead(head.weight, backend)
    model.set_output_embeddings(new)
    return new
