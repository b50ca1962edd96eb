"""The choice of transport (``AES_WEIGHT_TRANSPORT``) and the one call a trainer makes: above the
transports, so the interface they implement imports none of them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from aes_lib.weights.transport import TRANSPORTS, VersionMeta, WeightTransport, WeightTransportError, Write
from aes_proto.messages import PolicyVersion

if TYPE_CHECKING:
    import torch

    from aes_lib.config import Settings
    from aes_lib.service import Context


def weight_transport(settings: "Settings") -> WeightTransport:
    """The transport ``settings.weight_transport`` names; refuses an unknown name or one that
    cannot work here. The nccl transport holds its group: one per process and configuration."""
    name = settings.weight_transport
    if name == "filesystem":
        from aes_lib.weights.filesystem import FilesystemTransport

        return FilesystemTransport(Path(settings.weights_dir or settings.home / "weights"),
                                   untie_head=settings.engine == "vllm")
    if name == "store":
        from aes_lib.weights.store import StoreTransport

        return StoreTransport()
    if name == "nccl":
        from aes_lib.weights.nccl import NcclTransport

        key = (settings.nccl_master, settings.nccl_world_size, settings.model_url, settings.proposer_model_url)
        if key not in _GROUPS:
            _GROUPS[key] = NcclTransport.configured(settings)
        return _GROUPS[key]
    raise WeightTransportError(f"AES_WEIGHT_TRANSPORT must be one of {TRANSPORTS}, got {name!r}")


_GROUPS: dict[tuple, WeightTransport] = {}


async def publish_version(ctx: "Context", write: Write, meta: VersionMeta,
                          model: "torch.nn.Module | None" = None) -> PolicyVersion:
    """Publish the trainer's current weights as ``meta.version`` through the configured transport
    (``AES_WEIGHT_TRANSPORT``) and announce it: the one call a trainer makes per update."""
    return await weight_transport(ctx.settings).publish(ctx, write, meta, model)
