"""Policy losses by name, each with its own typed hyper-parameters.

A loss is a class whose fields are its hyper-parameters (a msgspec ``Struct`` or a dataclass)
and whose instances compute it (the ``Loss`` protocol). The learner's ``loss`` setting names
one and ``loss_params`` sets its fields (``key=value`` items, converted to the fields' types),
so a new loss needs no learner setting of its own. Losses come from three places: the built-in
DPPO ones, ``register_loss``, and any installed package that declares an ``aes.losses`` entry
point (``name = "module:Class"``, loaded when that name is asked for). A name is taken once:
neither a registration nor a plug-in replaces a loss already known.

This module imports no torch: settings are checked (``LearnerConfig``) where no model runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Annotated, ClassVar, Literal, Protocol

import msgspec

if TYPE_CHECKING:
    import torch

ENTRY_POINT_GROUP = "aes.losses"


class UnknownLossError(KeyError):
    """No loss is registered under the requested name."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class LossParamsError(ValueError):
    """``loss_params`` that the named loss does not take, or values not of its fields' types."""


class LossOutput(Protocol):
    """What the trainer reads from a loss (``aes_kernels.DppoOutput`` is one)."""

    loss: "torch.Tensor"
    """Scalar to minimise: a sum over tokens divided by ``normalizer``, so micro-batches add up."""
    masked_tokens: "torch.Tensor"
    """Tokens whose gradient a trust region removed (0 for a loss without one)."""
    mean_divergence: "torch.Tensor"
    """Mean policy divergence over the valid tokens (0 for a loss that does not measure one)."""


class Loss(Protocol):
    """A policy loss with its hyper-parameters bound (an instance of a registered class)."""

    def __call__(self, logp: "torch.Tensor", mu_logp: "torch.Tensor", adv: "torch.Tensor", valid: "torch.Tensor",
                 *, normalizer: float, backend: Literal["auto", "triton", "torch"]) -> LossOutput:
        """``logp`` the trainer's log-prob of each target token (with gradient), ``mu_logp`` the
        sampler's, ``adv`` its advantage, ``valid`` 1 for a real token and 0 for padding;
        ``normalizer`` the batch's completion-token count; ``backend`` as in ``aes_kernels``."""


class DppoTV(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """DPPO with a trust region on the binary total variation between trainer and sampler
    (``aes_kernels.dppo_objective``: the Triton kernel on CUDA, the torch reference elsewhere)."""

    divergence: ClassVar[Literal["tv", "kl"]] = "tv"
    delta: Annotated[float, msgspec.Meta(gt=0)] = 0.1
    """Trust-region threshold of the mask."""

    def __call__(self, logp, mu_logp, adv, valid, *, normalizer, backend):
        from aes_kernels import dppo_objective  # torch, imported only where a loss is computed

        return dppo_objective(logp, mu_logp, adv, valid, delta=self.delta, divergence=self.divergence,
                              normalizer=normalizer, backend=backend)


class DppoKL(DppoTV, frozen=True, forbid_unknown_fields=True):
    """DPPO with the trust region on the binary KL."""

    divergence: ClassVar[Literal["tv", "kl"]] = "kl"


_REGISTERED: dict[str, type] = {"dppo_tv": DppoTV, "dppo_kl": DppoKL}


def _plugins() -> dict[str, object]:
    # Read on each call (not cached): a package installed since start still counts.
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def loss_names() -> list[str]:
    """Every loss known: registered ones and the entry points' names."""
    return sorted({*_REGISTERED, *_plugins()})


def register_loss(name: str, cls: type) -> None:
    """Make ``cls`` (its fields the hyper-parameters, its instances a ``Loss``) available as ``name``."""
    if name in _REGISTERED or name in _plugins():
        raise ValueError(f"loss {name!r} is already registered")
    _REGISTERED[name] = _checked(name, cls)


def _checked(name: str, cls: object) -> type:
    is_params = isinstance(cls, type) and (issubclass(cls, msgspec.Struct) or dataclasses.is_dataclass(cls))
    if not is_params or not callable(getattr(cls, "__call__", None)):
        raise TypeError(f"loss {name!r}: expected a msgspec Struct or dataclass with __call__, got {cls!r}")
    return cls


def loss_class(name: str) -> type:
    """The class registered as ``name``; ``UnknownLossError`` naming every known loss."""
    if (cls := _REGISTERED.get(name)) is not None:
        return cls
    if (ep := _plugins().get(name)) is None:
        raise UnknownLossError(f"unknown loss {name!r}; registered: {', '.join(loss_names())}")
    return _checked(name, ep.load())  # type: ignore[attr-defined]  (not kept: uninstalling removes it)


def _param_names(cls: type) -> list[str]:
    if issubclass(cls, msgspec.Struct):
        return list(cls.__struct_fields__)
    return [f.name for f in dataclasses.fields(cls)]


def build_loss(name: str, params: Iterable[str] = ()) -> Loss:
    """The loss ``name`` with its hyper-parameters set from ``key=value`` items (the rest at
    their defaults); ``LossParamsError`` naming the offending key."""
    cls = loss_class(name)
    known = _param_names(cls)
    raw: dict[str, str] = {}
    for item in params:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise LossParamsError(f"loss {name!r}: expected key=value, got {item!r}")
        if key not in known:
            raise LossParamsError(f"loss {name!r} has no parameter {key!r} (its parameters: {', '.join(known) or 'none'})")
        raw[key] = value.strip()
    try:
        return msgspec.convert(raw, cls, strict=False)
    except (msgspec.ValidationError, TypeError, ValueError) as e:
        raise LossParamsError(f"loss {name!r}: {e}") from None
