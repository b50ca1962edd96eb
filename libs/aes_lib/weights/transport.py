"""The interface every weight transport implements (the transports import it; it imports none of them)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from aes_proto import subjects
from aes_proto.messages import PolicyName, PolicyVersion, Role

if TYPE_CHECKING:
    import torch

    from aes_lib.service import Context

TRANSPORTS = ("filesystem", "store", "nccl")
"""What ``AES_WEIGHT_TRANSPORT`` may name."""

Write = Callable[[Path], Awaitable[None]]
"""Writes the trainer's current weights as an HF-format folder at the path given (it does not
exist yet); on many ranks, a collective that rank 0 writes."""


class WeightTransportError(ValueError):
    """A transport that cannot work as configured (named, with the reason): refused at start."""


@dataclass(frozen=True)
class VersionMeta:
    """What the trainer says about the version it publishes (carried by ``PolicyVersion``)."""

    version: int
    prefix: str
    """Key prefix of the policy's versions (``LearnerConfig.checkpoint_prefix``, per policy)."""
    base_model: str
    run_id: str
    policy: PolicyName = "shared"
    solver_updates: int = 0
    trained_role: Role = "solver"
    keep: int = 0
    """Versions the transport keeps where it owns their copies (filesystem); 0: all."""

    def message(self, **where: object) -> PolicyVersion:
        """The announcement, naming where the weights are (``checkpoint=`` or ``folder=``)."""
        return PolicyVersion(idempotency_key=f"{self.run_id}:policy:{self.version}", episode_id=self.run_id,
                             version=self.version, step=self.version, base_model=self.base_model,
                             policy=self.policy, solver_updates=self.solver_updates,
                             trained_role=self.trained_role, **where)  # type: ignore[arg-type]


class WeightTransport(Protocol):
    """Trainer side of a transport: make ``meta.version`` loadable by the engines, announce it
    on ``subjects.POLICY_VERSION`` and return the announcement. ``model`` is the trainer's
    module, for transports that send parameters rather than a folder."""

    name: str

    async def publish(self, ctx: "Context", write: Write, meta: VersionMeta,
                      model: "torch.nn.Module | None" = None) -> PolicyVersion: ...


async def announce(ctx: "Context", pv: PolicyVersion) -> PolicyVersion:
    await ctx.publish(subjects.POLICY_VERSION, pv)
    return pv
