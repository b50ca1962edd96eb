"""Published weights as HF-format folders: written from a full state dict, read back as tensors.

The folder is what ``transformers.AutoModelForCausalLM.from_pretrained``, vLLM and the torch
engine load: ``config.json``, the base model's tokenizer files, ``*.safetensors`` (sharded
with an index above ``max_shard_size``). ``aes_lib.checkpoints`` moves it through the blob store.
"""

from __future__ import annotations

import copy
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from safetensors.torch import load_file

if TYPE_CHECKING:  # the writing side runs where only the ML stack is installed (bench/gpu_learner.py)
    from aes_lib.blobstore import BlobStore
    from aes_proto.messages import BlobRef

_NOT_TOKENIZER = ("config.json", ".safetensors", ".safetensors.index.json", ".bin", ".pt", ".gguf", ".pth")


class CheckpointError(ValueError):
    """A checkpoint that does not fit the model it is loaded into."""


def write_hf_folder(state: dict[str, torch.Tensor], config, folder: Path, *, dtype: torch.dtype,
                    tokenizer_from: Path | None = None, max_shard_size: str = "5GB") -> Path:
    """``state`` (full, unsharded) with ``config`` and the tokenizer files of ``tokenizer_from``."""
    from huggingface_hub import save_torch_state_dict

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if getattr(config, "tie_word_embeddings", False):
        state = {k: v for k, v in state.items() if k != "lm_head.weight"}  # transformers re-ties it on load
    save_torch_state_dict({k: _own_storage(v.detach().to("cpu", dtype)) for k, v in state.items()}, folder,
                          max_shard_size=max_shard_size)
    config = copy.deepcopy(config)
    config.dtype = dtype
    config.save_pretrained(folder)
    if tokenizer_from is not None:
        for f in Path(tokenizer_from).iterdir():
            if f.is_file() and not f.name.endswith(_NOT_TOKENIZER):
                shutil.copy2(f, folder / f.name)
    return folder


def _own_storage(t: torch.Tensor) -> torch.Tensor:
    """A gathered shard may be a view into a larger buffer, which safetensors refuses to save."""
    return t if t.untyped_storage().nbytes() == t.nbytes else t.clone()


def publish_model(store: BlobStore, prefix: str, model: torch.nn.Module, *, dtype: torch.dtype = torch.float32,
                  tokenizer_from: Path | None = None) -> BlobRef:
    """An unsharded ``model`` published under ``prefix`` as an HF-format folder; its manifest's ref."""
    from aes_lib.checkpoints import publish_folder

    with tempfile.TemporaryDirectory(prefix="aes-publish-") as tmp:
        write_hf_folder(model.state_dict(), model.config, Path(tmp), dtype=dtype, tokenizer_from=tokenizer_from)
        return publish_folder(store, prefix, Path(tmp))


def folder_tensors(folder: Path) -> dict[str, torch.Tensor]:
    """Every tensor of the folder's safetensors files (all shards)."""
    tensors: dict[str, torch.Tensor] = {}
    for shard in sorted(Path(folder).glob("*.safetensors")):
        tensors.update(load_file(shard))
    return tensors


def policy_tensors(store: BlobStore, ref: BlobRef) -> dict[str, torch.Tensor]:
    """The tensors of the published version whose manifest is ``ref`` (digests checked on fetch)."""
    from aes_lib.checkpoints import fetch_folder

    with tempfile.TemporaryDirectory(prefix="aes-policy-") as tmp:
        return folder_tensors(fetch_folder(store, ref, Path(tmp) / "policy"))


def load_tensors(model: torch.nn.Module, tensors: dict[str, torch.Tensor], name: str = "checkpoint") -> None:
    """Load ``tensors`` into ``model`` in place. Names and shapes must match, except that a tied
    parameter (the output layer sharing the embeddings) needs only one of its names present."""
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    aliases: dict[int, set[str]] = {}
    for n, p in model.named_parameters(remove_duplicate=False):
        aliases.setdefault(id(p), set()).add(n)
    covered = {n for names in aliases.values() if names & tensors.keys() for n in names}
    missing = sorted(set(missing) - covered)
    if missing or unexpected:
        raise CheckpointError(f"{name} does not fit the model: missing {missing[:5]}, unexpected {sorted(unexpected)[:5]}")
