"""Loading and pre-checking a dataset's tasks before anything is built: one verdict per task.

``precheck(path)`` answers, from the files alone (no Docker): ``build`` (the task loads and needs
nothing this sandbox lacks), ``no_reference`` (the same, but without a reference solution: the
solver's attempts decide at calibration), ``unsupported`` (with why), or ``load_error`` (the
specific ``BundleError``). Each carries the task's Harbor content digest, so identical tasks
(copies under other folder names) are validated once and a resumed run knows what it finished.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from aes_lib.bundle.errors import BundleError
from aes_lib.bundle.harbor_dataset import DigestUnsupportedError, content_digest
from aes_lib.bundle.task import BundleLimits, Task

Verdict = Literal["build", "no_reference", "unsupported", "load_error"]


@dataclasses.dataclass(frozen=True)
class Precheck:
    path: str
    verdict: Verdict
    task: str = ""
    """``[task].name`` (or the folder's name); empty when the task did not load."""
    detail: str = ""
    """Why it is unsupported, or the load error."""
    digest: str = ""
    """Harbor's content digest of the folder (``sha256:...``); empty when it cannot be computed."""

    @property
    def would_build(self) -> bool:
        return self.verdict in ("build", "no_reference")


def precheck(path: Path, limits: BundleLimits = BundleLimits()) -> Precheck:
    """The verdict on the task folder at ``path``, without building it."""
    try:
        task = Task.load(path, limits)
    except BundleError as e:
        return Precheck(str(path), "load_error", detail=f"{type(e).__name__}: {e}")
    try:
        digest = content_digest(task.root)
    except (DigestUnsupportedError, OSError):
        digest = ""
    if needs := task.unsupported:
        return Precheck(str(path), "unsupported", task.name, "; ".join(needs), digest)
    return Precheck(str(path), "build" if task.has_solution else "no_reference", task.name, "", digest)
