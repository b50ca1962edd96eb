"""GPU weight sync: the learner's rank 0 broadcasts its parameters to vLLM's workers over NCCL
(vLLM's weight-transfer API), instead of writing a folder that vLLM reads back from disk.

Only for a learner that shares a fabric with the engine (same node, or InfiniBand/RoCE between
them); elsewhere, and on every CPU machine, weight sync loads the published folder
(``weights.VLLMEngineClient``). The published ``PolicyVersion`` stays the record of each version
either way: a restarted engine is caught up from its folder. Not run on the CPU machines this
project tests on (vLLM answers 500 to these endpoints without CUDA); written against vLLM 0.32's
``vllm.distributed.weight_transfer``.

The engine is started with ``--weight-transfer-config '{"backend": "nccl"}'`` (``AES_VLLM_ARGS``)
and ``VLLM_SERVER_DEV_MODE=1`` (``vllm_serve`` sets it). The group is rank 0 (the learner) plus
every vLLM worker (``world_size`` = 1 + tensor-parallel x data-parallel size).

    push = NCCLWeightPush.connect(model, url, master_address="10.0.0.1", master_port=29555, world_size=2)
    push.send(version=7)   # pause (wait) -> broadcast -> reset prefix cache -> version -> resume
"""

from __future__ import annotations

import dataclasses

import httpx
import torch

from aes_lib.models.weights import EngineWeightsError


@dataclasses.dataclass
class NCCLWeightPush:
    """One learner rank's link to one vLLM server. Every learner rank calls ``send`` (an FSDP
    model gathers each parameter collectively); only rank 0 talks to the engine."""

    engine: object
    """vLLM's ``NCCLTrainerWeightTransferEngine``."""
    root: str
    is_sender: bool
    timeout_s: float = 300.0

    @classmethod
    def connect(cls, model: torch.nn.Module, url: str, *, master_address: str, master_port: int, world_size: int,
                rank: int = 0) -> "NCCLWeightPush":
        """Rendezvous with the engine's workers (they block in ``/init_weight_transfer_engine``
        until rank 0 opens its end); every learner rank calls it with its own ``rank``."""
        from vllm.distributed.weight_transfer.base import ModuleSource
        from vllm.distributed.weight_transfer.clients import HTTPVLLMWeightSyncClient
        from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerInitInfo, NCCLTrainerWeightTransferEngine

        root = url.rstrip("/").removesuffix("/v1")
        info = NCCLTrainerInitInfo(master_address=master_address, master_port=master_port, world_size=world_size,
                                   rank=rank)
        engine = NCCLTrainerWeightTransferEngine.trainer_init(
            info, client=HTTPVLLMWeightSyncClient(root), source=ModuleSource(model))
        return cls(engine, root, info.is_sender)

    def send(self, version: int) -> None:
        """Broadcast the current parameters as ``version``. The engine is paused with
        ``mode=wait`` around it, as the folder path does, so no completion mixes two versions."""
        if not self.is_sender:
            self.engine.send_weights()  # joins the gather; rank 0 drives the engine
            return
        self._post("/pause", params={"mode": "wait"})
        try:
            self.engine.send_weights()  # start_weight_update, broadcast + update_weights, finish
            self._post("/reset_prefix_cache")
            self._post("/update_weight_version", {"new_version": str(version)})
        finally:
            self._post("/resume")

    def close(self) -> None:
        self.engine.shutdown()

    def _post(self, path: str, body: dict | None = None, params: dict | None = None) -> None:
        try:
            r = httpx.post(self.root + path, json=body, params=params, timeout=self.timeout_s)
        except httpx.HTTPError as e:
            raise EngineWeightsError(f"POST {self.root}{path}: {type(e).__name__}: {e}") from e
        if r.status_code != 200:
            raise EngineWeightsError(f"POST {self.root}{path} -> HTTP {r.status_code}: {r.text[:300]}")
