"""Model weights as safetensors in the blob store."""

from __future__ import annotations

import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from aes_lib.blobstore import BlobStore
from aes_proto.messages import BlobRef


class CheckpointError(ValueError):
    """A checkpoint that does not fit the model it is loaded into."""


def save_checkpoint(store: BlobStore, key: str, model: torch.nn.Module, metadata: dict[str, str]) -> BlobRef:
    """Write the model's state dict under ``key``.

    Tied parameters (embeddings shared with the output layer) are stored once per
    name: safetensors refuses shared storage, and loading writes both names anyway.
    """
    tensors = {k: v.detach().to("cpu").contiguous().clone() for k, v in model.state_dict().items()}
    return store.put_bytes(key, st_save(tensors, metadata=metadata))


def checkpoint_tensors(store: BlobStore, ref: BlobRef) -> dict[str, torch.Tensor]:
    """The state dict stored at ``ref`` (checksum verified by the store)."""
    return st_load(store.get_bytes(ref))


def load_checkpoint(store: BlobStore, ref: BlobRef, model: torch.nn.Module) -> None:
    """Load the weights at ``ref`` into ``model`` in place (names and shapes must match)."""
    tensors = checkpoint_tensors(store, ref)
    try:
        model.load_state_dict(tensors, strict=True)
    except RuntimeError as e:
        raise CheckpointError(f"checkpoint {ref.key!r} does not fit the model: {e}") from e
