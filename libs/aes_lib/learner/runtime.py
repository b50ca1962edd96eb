"""What each rank of the learner holds and does: the model (sharded under several ranks), its
trainer, and the collective operations rank 0 drives through ``distributed.Ranks``.

Training state (sharded weights and AdamW moments) is saved and loaded with
``torch.distributed.checkpoint``: each rank writes and reads its own shards, in parallel,
and a save under N ranks loads under M. An update's data comes packed (``packing``): each rank
reads its own share from the blob store; rank 0 sends only where it is. A published version is
the full state dict gathered to rank 0 and written as an HF-format folder.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_state_dict,
    set_state_dict,
)

from aes_lib.learner.checkpoint import write_hf_folder
from aes_lib.learner.config import LearnerConfig
from aes_lib.learner.head import install_head
from aes_lib.learner.distributed import DTYPES, local_device, rank, shard_model, world_size
from aes_lib.learner.trainer import DppoTrainer, StepStats

if TYPE_CHECKING:
    from aes_lib.blobstore import BlobStore
    from aes_proto.messages import BlobRef

_LOADING = threading.Lock()
"""``from_pretrained`` swaps torch's init functions process-wide while it builds a model on the meta
device, so two learners of one process (separate policies) loading at once can leave one with
meta tensors ("Cannot copy out of meta tensor"): they load one at a time."""

class LearnerRuntime:
    model: torch.nn.Module
    trainer: DppoTrainer

    def __init__(self, store: BlobStore | None) -> None:
        self.store = store
        """Where every rank reads its own share of an update (``packing``); None: a runtime that only
        steps batches in its own process (``trainer.step``, as bench/gpu_learner.py does)."""

    def build(self, config: LearnerConfig, model_path: str) -> None:
        """Load the starting weights (fp32 master copy) and shard them when ranks are joined."""
        from transformers import AutoModelForCausalLM

        torch.manual_seed(config.seed)
        self.config, self.model_path = config, Path(model_path)
        with _LOADING:
            model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).to(local_device(config))
        if torch.distributed.is_initialized():
            install_head(model, config.kernel_backend)  # before sharding: FSDP swaps the params of the modules it saw
            shard_model(model, config)
        self.model = model
        self.trainer = DppoTrainer(model, config)

    def step(self, shares: Sequence[BlobRef], share_micro: Sequence[int], n_tokens: int) -> StepStats:
        """One update: this rank reads its packed share from the store and trains on it."""
        from aes_lib.learner.packing import read_rank_share  # msgspec: not needed by an in-process runtime

        if self.store is None:
            raise RuntimeError("this runtime has no blob store to read packed shares from")
        micro, n_micro = read_rank_share(self.store, shares, share_micro, rank(), world_size())
        return self.trainer.step_micro(micro, n_tokens, n_micro)

    def _state(self) -> dict:
        model_sd, optim_sd = get_state_dict(self.model, self.trainer.optimizer)
        return {"model": model_sd, "optim": optim_sd}

    def save(self, folder: str) -> None:
        """Every rank writes its shards of weights and moments into ``folder`` (complete on return)."""
        tmp = Path(f"{folder}.partial")
        if rank() == 0:
            shutil.rmtree(tmp, ignore_errors=True)
        dcp.save(self._state(), checkpoint_id=str(tmp))  # collective: returns once every rank wrote
        if rank() == 0:
            shutil.rmtree(folder, ignore_errors=True)
            tmp.rename(folder)
        self._barrier()

    def load(self, folder: str) -> None:
        state = self._state()
        dcp.load(state, checkpoint_id=folder)
        set_state_dict(self.model, self.trainer.optimizer, model_state_dict=state["model"],
                       optim_state_dict=state["optim"])

    def export(self, folder: str) -> None:
        """The full weights gathered to rank 0, written there as an HF-format folder."""
        state = get_model_state_dict(self.model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        if rank() == 0:
            write_hf_folder(state, self.model.config, Path(folder), dtype=DTYPES[self.config.publish_dtype],
                            tokenizer_from=self.model_path)
        self._barrier()

    @staticmethod
    def _barrier() -> None:
        if torch.distributed.is_initialized():
            torch.distributed.barrier()
