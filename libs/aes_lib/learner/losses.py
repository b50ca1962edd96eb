"""Policy losses by name, so the learner's ``loss`` setting picks one without code changes."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from aes_kernels import dppo_objective

LossFn = Callable[..., object]
"""``fn(logp, mu_logp, adv, valid, *, delta, normalizer, backend) -> aes_kernels.DppoOutput``."""


class UnknownLossError(KeyError):
    """No loss is registered under the requested name."""


LOSSES: dict[str, LossFn] = {}


def register_loss(name: str, fn: LossFn) -> None:
    if name in LOSSES:
        raise ValueError(f"loss {name!r} is already registered")
    LOSSES[name] = fn


def get_loss(name: str) -> LossFn:
    try:
        return LOSSES[name]
    except KeyError:
        raise UnknownLossError(f"unknown loss {name!r}; registered: {sorted(LOSSES)}") from None


register_loss("dppo_tv", partial(dppo_objective, divergence="tv"))
register_loss("dppo_kl", partial(dppo_objective, divergence="kl"))
