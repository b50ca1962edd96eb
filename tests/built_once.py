"""Session fixtures that build a model once per run, whichever pytest-xdist worker asks first."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], Path]) -> Path:
    """``build(folder)`` once per run, whichever pytest-xdist worker asks first: session fixtures
    are per worker, and a model exported or trained twice costs minutes on 2 cores. The others
    wait on the lock and reuse the result."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # shared by the workers of this run
    folder, done = root / f"built-{name}", root / f"built-{name}.done"
    with open(root / f"built-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.is_file():
            shutil.rmtree(folder, ignore_errors=True)  # a worker that died half-way
            folder.mkdir()
            done.write_text(str(build(folder)))
    return Path(done.read_text())
