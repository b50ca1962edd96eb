"""The learner over several ranks: process group, FSDP2 sharding, and rank 0 driving the others.

Launch: ``aes service learner --nproc N`` runs torchrun, which starts N processes with
``RANK``/``WORLD_SIZE``/``MASTER_ADDR`` set; ``init_ranks`` joins them (gloo on CPU,
nccl on CUDA, the same code). Rank 0 is the bus consumer; the others run ``follow``:
rank 0 broadcasts each collective operation (build the model, one update with every
rank's share, save or load the training state, export a version) over a gloo control
group, then runs it itself, so every rank enters the same collectives in the same order.

``shard_model``: ``fully_shard`` on every decoder layer, then on the root (embeddings,
final norm, output layer), with FSDP2's ``MixedPrecisionPolicy`` (compute in
``param_dtype``, gradients reduced in ``reduce_dtype``, fp32 master weights and AdamW
moments), optional activation checkpointing and CPU offload.
"""

from __future__ import annotations

import ctypes
import datetime
import os
import signal
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from aes_lib.learner.config import LearnerConfig

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
CONTROL_TIMEOUT = datetime.timedelta(days=7)
"""The followers wait on rank 0's next command for as long as the learner idles between updates."""


def under_torchrun() -> bool:
    return "TORCHELASTIC_RUN_ID" in os.environ and "RANK" in os.environ


def die_with_parent() -> None:
    """A rank dies with torchrun's agent: a SIGKILLed launcher must leave no rank consuming."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the agent's own teardown has to do
        pass


def local_device(config: LearnerConfig) -> torch.device:
    dev = torch.device(config.device)
    if dev.type == "cuda" and dev.index is None:
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return dev


def init_ranks(config: LearnerConfig) -> None:
    """Join the process group described by torchrun's environment (once per process)."""
    if dist.is_initialized():
        return
    dev = local_device(config)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")


def shard_model(model: torch.nn.Module, config: LearnerConfig) -> torch.nn.Module:
    """FSDP2 over the current process group: one unit per decoder layer plus the root."""
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

    if config.activation_checkpointing:
        model.activation_checkpointing_enable({"use_reentrant": False})  # non-reentrant: FSDP's hooks rerun
    kw: dict[str, Any] = {"mp_policy": MixedPrecisionPolicy(param_dtype=DTYPES[config.param_dtype],
                                                           reduce_dtype=DTYPES[config.reduce_dtype])}
    if config.cpu_offload:
        kw["offload_policy"] = CPUOffloadPolicy()
    for layer in decoder_layers(model):
        fully_shard(layer, **kw)
    fully_shard(model, **kw)
    return model


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The repeated blocks of a transformers causal LM (Llama, Qwen2/3, their MoE variants...)."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    if layers is None:
        raise ValueError(f"{type(model).__name__}: no model.layers to shard; only decoder-only LMs are supported")
    return list(layers)


def rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def world_size() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


class Ranks:
    """Rank 0's handle on every rank: ``call(name, *args)`` runs ``target.name(*args)`` everywhere."""

    def __init__(self) -> None:
        self.world = world_size()
        self._group = dist.new_group(backend="gloo", timeout=CONTROL_TIMEOUT) if self.world > 1 else None

    def call(self, target: object, name: str, *args: Any) -> Any:
        if self._group is not None:
            dist.broadcast_object_list([(name, args)], src=0, group=self._group)
        return getattr(target, name)(*args)

    def stop(self) -> None:
        if self._group is not None:
            dist.broadcast_object_list([None], src=0, group=self._group)

    def follow(self, target: object, on_command: Callable[[str], None] | None = None) -> None:
        """Ranks > 0: run rank 0's commands on ``target`` until it stops."""
        while True:
            box: list[Any] = [None]
            dist.broadcast_object_list(box, src=0, group=self._group)
            if box[0] is None:
                return
            name, args = box[0]
            if on_command:
                on_command(name)
            getattr(target, name)(*args)
