"""A Harbor task directory, loaded and checked."""

from __future__ import annotations

import dataclasses
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from aes_lib.bundle.compose import ComposeSpec, load_compose
from aes_lib.bundle.config import TaskConfig, parse_task_toml
from aes_lib.bundle.errors import (
    ArchiveTooLargeError,
    EmptyInstructionError,
    FileTooLargeError,
    InstructionEncodingError,
    LinkEscapeError,
    MissingFileError,
    SpecialFileError,
    TomlSyntaxError,
)

REQUIRED_FILES = ("instruction.md", "task.toml", "solution/solve.sh", "tests/test.sh")
ENVIRONMENT_FILES = ("Dockerfile", "docker-compose.yaml")


@dataclasses.dataclass(frozen=True)
class BundleLimits:
    """Size limits for a bundle, on disk and as an archive."""

    max_file_bytes: int = 64 << 20
    """Largest single file."""
    max_total_bytes: int = 256 << 20
    """Largest sum of file sizes (unpacked)."""
    max_archive_bytes: int = 64 << 20
    """Largest compressed archive."""
    max_entries: int = 10_000
    """Most files, directories and links."""
    max_ratio: float = 200.0
    """Largest unpacked/compressed ratio, checked while inflating once past ``ratio_floor``."""
    ratio_floor: int = 1 << 20
    """Unpacked bytes below which the ratio is not checked (tiny archives inflate a lot)."""


@dataclasses.dataclass(frozen=True)
class Task:
    """A checked Harbor task directory::

        <root>/
        ├── instruction.md          what the agent is asked to do (UTF-8, non-empty)
        ├── task.toml               TaskConfig: timeouts, resources, metadata
        ├── environment/
        │   ├── Dockerfile          the agent's container (``main``); optional with
        │   │                       [environment] docker_image
        │   └── docker-compose.yaml optional: services beside main (``ComposeSpec``)
        ├── solution/
        │   └── solve.sh            reference solution, run by the oracle agent
        └── tests/
            └── test.sh             verifier: writes /logs/verifier/reward.txt or reward.json

    Load with :meth:`Task.load`; it raises a :class:`BundleError` subclass for each problem.
    """

    root: Path
    config: TaskConfig
    instruction: str
    compose: ComposeSpec | None = None
    """The services of environment/docker-compose.yaml beside the main container, if any."""

    @classmethod
    def load(cls, root: str | Path, limits: BundleLimits = BundleLimits()) -> "Task":
        root = Path(root).resolve()
        if not root.is_dir():
            raise MissingFileError(f"{root}: not a directory")
        for rel in REQUIRED_FILES:
            if not (root / rel).is_file():
                raise MissingFileError(f"missing {rel}")
        check_tree(root, limits)
        config = parse_task_toml(_read_text(root / "task.toml", "task.toml"))
        # As in Harbor, a prebuilt docker_image makes the build recipe optional.
        if not config.environment.docker_image and not any(
                (root / "environment" / f).is_file() for f in ENVIRONMENT_FILES):
            raise MissingFileError("missing environment/Dockerfile (or environment/docker-compose.yaml, "
                                   "or [environment] docker_image)")
        instruction = _read_text(root / "instruction.md", "instruction.md")
        if not instruction.strip():
            raise EmptyInstructionError("instruction.md is empty")
        return cls(root=root, config=config, instruction=instruction, compose=load_compose(root / "environment"))

    @property
    def name(self) -> str:
        """``[task].name`` if set, else the directory's name."""
        return self.config.task.name if self.config.task else self.root.name

    @property
    def warnings(self) -> list[str]:
        """task.toml's fields kept but not applied (see ``TaskConfig.warnings``), and the
        compose file's."""
        return self.config.warnings() + list(self.compose.warnings if self.compose else ())

    @property
    def environment_dir(self) -> Path:
        return self.root / "environment"

    @property
    def solution_dir(self) -> Path:
        return self.root / "solution"

    @property
    def tests_dir(self) -> Path:
        return self.root / "tests"


def _read_text(path: Path, label: str) -> str:
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        if label == "instruction.md":
            raise InstructionEncodingError(f"instruction.md is not UTF-8: {e}") from e
        raise TomlSyntaxError(f"{label} is not UTF-8 text: {e}") from e
    if "\x00" in text and label == "instruction.md":
        raise InstructionEncodingError("instruction.md contains NUL bytes (binary, not text)")
    return text


def walk(root: Path) -> Iterator[tuple[str, os.stat_result]]:
    """Every entry under ``root`` as (posix relative path, lstat), sorted, links not followed."""
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        names = sorted(os.listdir(root / rel_dir), reverse=True)
        for name in names:
            rel = f"{rel_dir}/{name}" if rel_dir else name
            st = os.lstat(root / rel)
            yield rel, st
            if stat.S_ISDIR(st.st_mode):
                stack.append(rel)


def check_tree(root: Path, limits: BundleLimits) -> None:
    """Reject special files, links leaving ``root``, and oversize files or totals."""
    root = root.resolve()
    total = 0
    for count, (rel, st) in enumerate(walk(root), start=1):
        if count > limits.max_entries:
            raise ArchiveTooLargeError(f"more than {limits.max_entries} entries")
        if stat.S_ISLNK(st.st_mode):
            check_link(root, rel)
        elif stat.S_ISREG(st.st_mode):
            if st.st_size > limits.max_file_bytes:
                raise FileTooLargeError(f"{rel}: {st.st_size} bytes > {limits.max_file_bytes}")
            total += st.st_size
            if total > limits.max_total_bytes:
                raise ArchiveTooLargeError(f"bundle exceeds {limits.max_total_bytes} bytes")
        elif not stat.S_ISDIR(st.st_mode):
            raise SpecialFileError(f"{rel}: not a regular file, directory or symlink")


def check_link(root: Path, rel: str) -> None:
    """A symlink must be relative and, fully resolved (through other links), stay in ``root``."""
    target = os.readlink(root / rel)
    if target.startswith("/"):
        raise LinkEscapeError(f"{rel}: absolute symlink to {target}")
    resolved = os.path.realpath(root / rel)
    if os.path.commonpath([resolved, str(root)]) != str(root):
        raise LinkEscapeError(f"{rel}: symlink to {target} leaves the bundle")
