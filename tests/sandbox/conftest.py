"""Fixtures for sandbox tests (the Docker engine and ``test_label`` are the root conftest's), and the fixture
tasks under ``tasks/``."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

collect_ignore = ["tasks"]  # the fixture tasks' own test_*.py run inside containers only

TASKS = Path(__file__).parent / "tasks"


@pytest.fixture
def make_task(tmp_path: Path) -> Callable[..., Path]:
    """Copy the ``echo`` fixture task and overwrite some of its files: ``make_task(**{"solution/solve.sh": "..."})``."""

    def make(files: dict[str, str] | None = None, name: str = "echo") -> Path:
        root = tmp_path / f"task-{uuid.uuid4().hex[:6]}"
        shutil.copytree(TASKS / name, root)
        for rel, text in (files or {}).items():
            (root / rel).write_text(text)
            if rel.endswith(".sh"):
                (root / rel).chmod(0o755)
        return root

    return make
