"""A family instance as a Harbor task directory, and the instance read back from a task."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import tomli_w

from aes_lib.bundle import BundleError, Task
from aes_lib.families.base import Family, Instance, NotAFamilyInstanceError, Params
from aes_lib.families.registry import get
from aes_lib.sandbox import VERIFIER_TEMPLATE

BASE_IMAGE = "aes-base:latest"


AGENT_TIMEOUT_S = 120.0
"""Every instance's agent timeout: the solver's prompt states it (``LoopLimits.within``)."""


def _label(family: Family, difficulty: int) -> str:
    """Harbor's free-form difficulty word, by thirds of the family's range."""
    span = family.max_difficulty - family.min_difficulty + 1
    return ("easy", "medium", "hard")[min(2, 3 * (difficulty - family.min_difficulty) // span)]


def _task_toml(family: Family, params: Params, description: str) -> str:
    instance = Instance(family.name, params)
    return tomli_w.dumps({
        "schema_version": "1.4",
        "task": {"name": f"aes-families/{family.name}-d{params.difficulty}-s{params.seed}",
                 "description": description, "authors": [{"name": "AutoEnvScaling families"}],
                 "keywords": ["procedural", family.name]},
        "metadata": {"difficulty": _label(family, params.difficulty), "category": family.name,
                     "tags": ["procedural", family.name], "family": instance.metadata()},
        "agent": {"timeout_sec": AGENT_TIMEOUT_S},
        "verifier": {"timeout_sec": 60.0},
        "environment": {"build_timeout_sec": 120.0, "cpus": 1, "memory_mb": 256, "storage_mb": 1024,
                        "allow_internet": False},
    })


def write_instance(family: Family, params: Params, dest: Path) -> Path:
    """``family`` at ``params`` as a task directory at ``dest`` (replaced if it exists)."""
    spec = family.instance(params)
    shutil.rmtree(dest, ignore_errors=True)
    for sub in ("environment", "solution", "tests"):
        (dest / sub).mkdir(parents=True)
    (dest / "instruction.md").write_text(spec.instruction)
    (dest / "task.toml").write_text(_task_toml(family, params, spec.description))
    (dest / "environment" / "Dockerfile").write_text(f"FROM {BASE_IMAGE}\nWORKDIR /app\n")
    solve = dest / "solution" / "solve.sh"
    solve.write_text(f"#!/bin/bash\nset -euo pipefail\n{spec.solution}\n")
    solve.chmod(0o755)
    (dest / "tests" / "test_task.py").write_text(spec.tests)
    shutil.copy(VERIFIER_TEMPLATE / "test.sh", dest / "tests" / "test.sh")
    return dest


def instance_of(metadata: dict[str, Any]) -> Instance:
    """The instance a task's ``[metadata]`` records; ``NotAFamilyInstanceError`` or the
    family's own error when it records none, an unknown family, or parameters it refuses."""
    found = metadata.get("family")
    if not isinstance(found, dict) or not isinstance(found.get("name"), str):
        raise NotAFamilyInstanceError("task.toml has no [metadata.family] table with a name: no family wrote this task")
    family = get(found["name"])
    params = family.check(Params(difficulty=found.get("difficulty"), seed=found.get("seed")))  # type: ignore[arg-type]
    return Instance(family.name, params)


def read_instance(task_dir: Path) -> Instance:
    """``instance_of`` the task at ``task_dir`` (an unreadable task is ``NotAFamilyInstanceError``)."""
    try:
        task = Task.load(task_dir)
    except BundleError as e:
        raise NotAFamilyInstanceError(f"not a readable task: {type(e).__name__}: {e}") from e
    return instance_of(task.config.metadata)
