"""Harbor's dataset manifest (``dataset.toml``) and the content digest it pins each task by.

A Harbor dataset folder::

    DIR/
    ├── dataset.toml        # [dataset] name = "org/name"; [[tasks]] name + digest; [metadata]
    ├── <task folder>/      # a task directory (task.toml, instruction.md, environment/, ...)
    └── ...

``harbor run -p DIR`` runs every task folder one level down; ``dataset.toml`` makes the folder
a dataset Harbor can add to, sync and publish. A task's digest is Harbor 0.26's content hash:
the sha256 of one ``<relative path>\\0<sha256 of the file>\\n`` line per file, in path order,
over task.toml, instruction.md, README.md, trajectory.json and every file below
environment/, tests/, solution/ and steps/, less Harbor's default ignores (bytecode, editor
files). A task that carries a ``.gitignore`` or ``.harborignore`` is refused here: Harbor
would apply gitignore rules this module does not implement, and a digest that differs from
Harbor's would make the manifest lie (``harbor dataset sync`` can pin such a task).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import json
import re
from pathlib import Path
from typing import Any

_SINGLE_FILES = ("task.toml", "instruction.md", "README.md", "trajectory.json")
_TREES = ("environment", "tests", "solution", "steps")
_IGNORED_DIRS = {"__pycache__"}
_IGNORED_FILES = ("*.pyc", ".DS_Store", "*.swp", "*.swo", "*~")
_IGNORE_FILES = (".gitignore", ".harborignore")
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]*/[a-zA-Z0-9][a-zA-Z0-9._-]*$")
"""Harbor's ``org/name`` rule for dataset and task names (and no ``..``)."""
MANIFEST = "dataset.toml"


class DigestUnsupportedError(ValueError):
    """The task's files are selected by ignore rules this module does not apply."""


@dataclasses.dataclass(frozen=True)
class DatasetTask:
    """One ``[[tasks]]`` entry, and what ``[metadata]`` records of it."""

    name: str
    """``org/name``: the task's own ``[task] name``."""
    folder: str
    """Its folder under the dataset root."""
    digest: str
    """``sha256:<hex>``: :func:`content_digest` of the folder."""
    info: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Recorded under ``[[metadata.aes]]`` beside ``name`` and ``folder`` (pool fields)."""


def valid_name(name: str) -> bool:
    return bool(NAME_PATTERN.match(name)) and ".." not in name


def check_dataset_name(name: str) -> None:
    if not valid_name(name):
        raise ValueError(f"dataset name {name!r} is not org/name (letters, digits, '.', '_', '-')")


def content_digest(task_dir: Path) -> str:
    """Harbor's content hash of the task folder, as ``sha256:<hex>``."""
    task_dir = task_dir.resolve()
    if found := [p for p in task_dir.rglob("*") if p.name in _IGNORE_FILES]:
        raise DigestUnsupportedError(f"{found[0].relative_to(task_dir)}: ignore rules are not applied here; "
                                     "pin this task with `harbor dataset sync`")
    files = [task_dir / name for name in _SINGLE_FILES if (task_dir / name).is_file()]
    for tree in _TREES:
        if (task_dir / tree).is_dir() and not (task_dir / tree).is_symlink():
            files += _tree_files(task_dir / tree)
    outer = hashlib.sha256()
    for f in sorted(files, key=lambda p: p.relative_to(task_dir).as_posix()):
        with f.open("rb") as data:
            file_hash = hashlib.file_digest(data, "sha256").hexdigest()
        outer.update(f"{f.relative_to(task_dir).as_posix()}\0{file_hash}\n".encode())
    return f"sha256:{outer.hexdigest()}"


def _tree_files(directory: Path) -> list[Path]:
    """Regular files (or links to them) below ``directory``; linked directories are not entered."""
    out = []
    for path in sorted(directory.iterdir()):
        if path.is_dir() and not path.is_symlink():
            if path.name not in _IGNORED_DIRS:
                out += _tree_files(path)
        elif path.is_file() and not any(fnmatch.fnmatchcase(path.name, g) for g in _IGNORED_FILES):
            out.append(path)
    return out


def manifest_text(name: str, tasks: list[DatasetTask], description: str = "") -> str:
    """``dataset.toml`` for a dataset called ``name`` (``org/name``) holding ``tasks``."""
    check_dataset_name(name)
    lines = ["[dataset]", f"name = {_s(name)}", f"description = {_s(description)}", ""]
    for t in tasks:
        lines += ["[[tasks]]", f"name = {_s(t.name)}", f"digest = {_s(t.digest)}", ""]
    lines += ["[metadata]", 'exported_by = "aes pool export"', ""]
    for t in tasks:
        lines.append("[[metadata.aes]]")
        lines += [f"{key} = {_value(v)}" for key, v in {"name": t.name, "folder": t.folder, **t.info}.items()
                  if v is not None]
        lines.append("")
    return "\n".join(lines)


def _s(text: str) -> str:
    # A JSON string is a TOML basic string: the same escapes, quotes and \uXXXX.
    return json.dumps(text, ensure_ascii=False)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return _s(str(v))
