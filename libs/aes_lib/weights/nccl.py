"""The nccl transport: the trainer broadcasts its parameters straight into vLLM's GPU workers
(``aes_lib.models.nccl_weights``: pause, broadcast, reset the prefix cache, set the version,
resume), then publishes the folder to the blob store as the version's record (a restarted
engine is caught up from it by weight sync, which finds the running engine already serving the
version and does nothing). Only where trainer and engine share a GPU fabric; refused at start
elsewhere, with the reason.

vLLM is started with ``--weight-transfer-config '{"backend": "nccl"}'`` (``AES_VLLM_ARGS``); the
group is the trainer's rank 0 and every vLLM worker (``AES_NCCL_WORLD_SIZE``), meeting at
``AES_NCCL_MASTER``. One engine per group: a policy served by two engines needs two groups,
which this transport does not make (use the filesystem transport there).
"""

from __future__ import annotations

import asyncio
import importlib.util
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from aes_lib.weights.store import StoreTransport
from aes_lib.weights.transport import VersionMeta, WeightTransportError, Write
from aes_proto.messages import PolicyVersion

if TYPE_CHECKING:
    import torch

    from aes_lib.config import Settings
    from aes_lib.service import Context


def master(value: str) -> tuple[str, int]:
    """``host:port`` of ``AES_NCCL_MASTER``."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise WeightTransportError(f"AES_NCCL_MASTER must be host:port (where the trainer's rank 0 listens), "
                                   f"got {value!r}")
    return host, int(port)


@dataclass
class NcclTransport:
    engine_url: str
    master_address: str
    master_port: int
    world_size: int
    name: str = "nccl"
    record: StoreTransport = field(default_factory=StoreTransport)
    _push: object = field(default=None, init=False, repr=False)

    @classmethod
    def configured(cls, settings: "Settings") -> "NcclTransport":
        """From ``settings``; refuses a machine without CUDA, a vLLM without its weight-transfer
        API, a bad group address, and a policy served by more than one engine."""
        import torch

        if not torch.cuda.is_available():
            raise WeightTransportError("AES_WEIGHT_TRANSPORT=nccl needs a CUDA GPU on the trainer (torch sees none): "
                                       "use filesystem (same machine or a shared mount) or store")
        if importlib.util.find_spec("vllm") is None or importlib.util.find_spec(
                "vllm.distributed.weight_transfer") is None:
            raise WeightTransportError("AES_WEIGHT_TRANSPORT=nccl needs vLLM's weight-transfer API (vllm >= 0.32 with "
                                       "CUDA) in the trainer's interpreter")
        host, port = master(settings.nccl_master)
        urls = {u for u in (settings.model_url, settings.proposer_model_url) if u}
        if len(urls) != 1:
            raise WeightTransportError(f"AES_WEIGHT_TRANSPORT=nccl pushes to one engine; the policy is served by "
                                       f"{sorted(urls) or 'none (AES_MODEL_URL is empty)'}")
        if settings.nccl_world_size < 2:
            raise WeightTransportError(f"AES_NCCL_WORLD_SIZE counts the trainer and vLLM's workers (>= 2), "
                                       f"got {settings.nccl_world_size}")
        return cls(urls.pop(), host, port, settings.nccl_world_size)

    async def publish(self, ctx: "Context", write: Write, meta: VersionMeta,
                      model: "torch.nn.Module | None" = None) -> PolicyVersion:
        if model is None:
            raise WeightTransportError("the nccl transport broadcasts the trainer's parameters: "
                                       "publish_version needs the model (a single-rank trainer's)")
        if self._push is None:
            from aes_lib.models.nccl_weights import NCCLWeightPush

            self._push = await asyncio.to_thread(
                NCCLWeightPush.connect, model, self.engine_url, master_address=self.master_address,
                master_port=self.master_port, world_size=self.world_size)
        await asyncio.to_thread(self._push.send, meta.version)  # type: ignore[attr-defined]
        return await self.record.publish(ctx, write, meta)
