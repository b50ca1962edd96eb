"""Human-written tasks imported from a Harbor dataset: finding them, and the network policy
an operator may give them.

Harbor gives a task the public network unless its task.toml says otherwise; this sandbox
gives none. Generated tasks (proposer candidates) always get this sandbox's default. For
imported datasets the operator chooses with ``AES_IMPORTED_NETWORK`` (``aes pool seed
--from``, ``aes validate --imported``): ``off`` (the default) keeps the sandbox default,
``harbor`` follows Harbor's, so an imported task that leaves the network unset is run, and
seeded, with ``allow_internet = true`` written into a copy of its task.toml (the pool's
bundle then says so itself, wherever it runs).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Literal

from aes_lib.bundle.config import grant_network, leaves_network_unset

ImportedNetwork = Literal["off", "harbor"]
MANIFESTS = ("registry.json",)
"""Dataset indexes read besides the folder listing: Harbor's registry format (a list of
datasets, each with ``tasks[].path``). A ``dataset.toml`` (what ``aes pool export`` writes) names
tasks by ``org/name`` and digest, not by folder: its tasks are the folders one level down."""


@dataclasses.dataclass(frozen=True)
class DatasetTasks:
    """The task folders of a dataset, and index entries that name no local folder."""

    dirs: list[Path]
    skipped: list[str]
    """``name: why`` for each index entry not found here (a git URL, a missing path)."""


def dataset_tasks(root: Path) -> DatasetTasks:
    """The task folders of the Harbor dataset at ``root``: ``root`` itself when it is a task
    folder (has task.toml), else its sub-folders with a task.toml (one level down, as Harbor
    reads a local dataset) and the local paths a ``registry.json`` at ``root`` names."""
    root = root.resolve()
    if (root / "task.toml").is_file():
        return DatasetTasks([root], [])
    found = {p.resolve() for p in root.iterdir() if p.is_dir() and (p / "task.toml").is_file()}
    skipped: list[str] = []
    for manifest in MANIFESTS:
        if (root / manifest).is_file():
            for name, path, remote in _manifest_entries(root / manifest):
                where = (root / path).resolve() if path else None
                if remote:
                    skipped.append(f"{name}: remote ({remote}), not fetched")
                elif where is None or not where.is_relative_to(root) or not (where / "task.toml").is_file():
                    skipped.append(f"{name}: {path or 'no path'} is not a task folder under {root}")
                else:
                    found.add(where)
    return DatasetTasks(sorted(found), skipped)


def _manifest_entries(path: Path) -> list[tuple[str, str, str]]:
    """(name, path, git url) of each task a registry.json lists."""
    data = json.loads(path.read_text())
    datasets = data if isinstance(data, list) else [data]
    out = []
    for ds in datasets:
        for t in (ds.get("tasks") or []) if isinstance(ds, dict) else []:
            if isinstance(t, dict):
                out.append((str(t.get("name") or t.get("path") or "?"), str(t.get("path") or ""),
                            str(t.get("git_url") or "")))
    return out


def needs_network_grant(task_dir: Path, policy: ImportedNetwork) -> bool:
    """Whether ``policy`` gives the task at ``task_dir`` a network its task.toml does not state."""
    if policy != "harbor":
        return False
    try:
        return leaves_network_unset((task_dir / "task.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError):  # unreadable or not TOML: loading reports it
        return False


def as_imported(task_dir: Path, scratch: Path, policy: ImportedNetwork) -> Path:
    """The folder to validate or seed for the imported task at ``task_dir``: the folder
    itself, or, where ``policy`` grants the network, a copy under ``scratch`` (an empty
    folder of its own; the copy keeps the folder's name) whose task.toml says
    ``allow_internet = true``."""
    if not needs_network_grant(task_dir, policy):
        return task_dir
    dest = scratch / task_dir.name
    shutil.copytree(task_dir, dest, symlinks=True)
    toml = dest / "task.toml"
    toml.write_text(grant_network(toml.read_text(encoding="utf-8")), encoding="utf-8")
    return dest
