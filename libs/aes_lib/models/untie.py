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
import shutil
from pathlib import Path

HEAD = "lm_head.weight"
HEAD_FILE = "lm_head.safetensors"


def untie(folder: Path) -> Path:
    """Rewrite ``folder`` in place so its output head is a weight of its own (a no-op for a
    folder that does not tie them, or one already rewritten); returns it."""
    folder = Path(folder)
    config = json.loads((folder / "config.json").read_text())
    if not config.get("tie_word_embeddings"):
        return folder
    from safetensors import safe_open
    from safetensors.torch import save_file

    index = folder / "model.safetensors.index.json"
    for shard in sorted(folder.glob("*.safetensors")):
        with safe_open(shard, "pt") as f:
            key = next((k for k in f.keys() if k.endswith("embed_tokens.weight")), None)
            if key is not None:
                save_file({HEAD: f.get_tensor(key).clone()}, folder / HEAD_FILE, metadata={"format": "pt"})
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
