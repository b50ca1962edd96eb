"""Give a checkpoint's tied output head a weight of its own, for vLLM.

vLLM's in-place reload (``/collective_rpc reload_weights``, vllm 0.32, checked on its CPU
build) replaces the input embedding's tensor but leaves a tied output head (SmolLM2 and
most small models tie them) on the old one: after a load, logits come from the old head
and the new body. A folder whose head is stored as ``lm_head.weight`` with
``tie_word_embeddings: false`` loads correctly, gives the same logits, and costs one more
embedding-sized tensor. The engine is started from such a folder (``vllm_serve``) and
every version is rewritten so before it is loaded (``weights.VLLMEngineClient``).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

HEAD = "lm_head.weight"
HEAD_FILE = "lm_head.safetensors"


def untie(folder: Path) -> Path:
    """Rewrite ``folder`` in place so its output head is a weight of its own (a no-op for a
    folder that does not tie them, or one already rewritten); returns it. The head's bytes are
    the embedding's, copied from its shard by the kernel (no tensor is decoded or re-encoded)."""
    folder = Path(folder)
    config = json.loads((folder / "config.json").read_text())
    if not config.get("tie_word_embeddings"):
        return folder
    index = folder / "model.safetensors.index.json"
    for shard in sorted(folder.glob("*.safetensors")):
        header, data_start = _header(shard)
        key = next((k for k in header if k.endswith("embed_tokens.weight")), None)
        if key is not None:
            _copy_tensor(shard, data_start, header[key], folder / HEAD_FILE)
            break
    else:
        return folder  # an architecture whose embedding we cannot name: left as it is
    if index.is_file():
        data = json.loads(index.read_text())
        data["weight_map"][HEAD] = HEAD_FILE
        index.write_text(json.dumps(data, indent=2))
    config["tie_word_embeddings"] = False
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    return folder


def _header(shard: Path) -> tuple[dict, int]:
    """A safetensors file's header and the offset where its tensor data starts."""
    with shard.open("rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n)), 8 + n


def _copy_tensor(src: Path, data_start: int, info: dict, dest: Path) -> None:
    """A safetensors file holding one tensor, ``HEAD``, whose bytes are ``info``'s in ``src``."""
    begin, end = info["data_offsets"]
    size = end - begin
    header = json.dumps({"__metadata__": {"format": "pt"},
                         HEAD: {"dtype": info["dtype"], "shape": info["shape"], "data_offsets": [0, size]}}).encode()
    header += b" " * (-len(header) % 8)  # the data starts 8-aligned, as safetensors writes it
    with src.open("rb") as fin, dest.open("wb") as fout:
        fout.write(struct.pack("<Q", len(header)) + header)
        fout.flush()
        offset, left = data_start + begin, size
        fin.seek(offset)
        while left:
            if hasattr(os, "copy_file_range"):  # Linux: the kernel copies, nothing passes through Python
                done = os.copy_file_range(fin.fileno(), fout.fileno(), left, offset)
            else:
                done = fout.write(fin.read(min(left, 64 << 20)))
            if not done:
                raise OSError(f"{src}: ended inside {HEAD}'s source tensor")
            offset, left = offset + done, left - done


def untied_copy(src: Path, dest: Path) -> Path:
    """``src`` itself when it ties nothing, else an untied copy at ``dest`` (made once)."""
    if not json.loads((Path(src) / "config.json").read_text()).get("tie_word_embeddings"):
        return Path(src)
    if (dest / HEAD_FILE).is_file():
        return dest
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp)
    untie(tmp)
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest
