"""A Harbor task directory, loaded and checked."""

from __future__ import annotations

import dataclasses
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import msgspec

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

WINDOWS_TESTS = ("test.bat", "test.ps1", "test.cmd")
"""What Harbor runs as a Windows task's tests (none of which runs here)."""


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
        ├── solution/               optional (Harbor's oracle agent alone needs it): an
        │   └── solve.sh            imported task may come without; admission of a generated
        │                           one requires it (``validate_task(require_reference=...)``)
        ├── tests/
        │   └── test.sh             verifier: writes /logs/verifier/reward.txt or reward.json
        └── steps/<name>/           a multi-step task ([[steps]]) instead of instruction.md:
            ├── instruction.md      each step's instruction, and its own tests/ (else the
            └── tests/test.sh       shared tests/) and solution/

    Load with :meth:`Task.load`; it raises a :class:`BundleError` subclass for each problem.
    A task that loads may still need what this sandbox does not run (:attr:`unsupported`).
    """

    root: Path
    config: TaskConfig
    instruction: str
    compose: ComposeSpec | None = None
    """The services of environment/docker-compose.yaml (or .yml) beside the main container, if any."""
    steps: tuple[str, ...] = ()
    """Each ``[[steps]]`` step's instruction, in order (``instruction`` is the first's)."""
    step: str | None = None
    """Set on the view of one step (:meth:`for_step`): its solution/ and tests/ are the step's."""

    @classmethod
    def load(cls, root: str | Path, limits: BundleLimits = BundleLimits()) -> "Task":
        root = Path(root).resolve()
        if not root.is_dir():
            raise MissingFileError(f"{root}: not a directory")
        if not (root / "task.toml").is_file():
            raise MissingFileError("missing task.toml")
        check_tree(root, limits)
        config = parse_task_toml(_read_text(root / "task.toml", "task.toml"))
        # As in Harbor: a prebuilt docker_image makes environment/ optional; an environment/
        # without a recipe loads (computer-use tasks) and is `unsupported` here.
        if not config.environment.docker_image and not (root / "environment").is_dir():
            raise MissingFileError("missing environment/ (a Dockerfile or docker-compose.yaml), "
                                   "or [environment] docker_image")
        if config.steps:
            steps = tuple(_step_instruction(root, step.name) for step in config.steps)
            for step in config.steps:
                _require_tests(root, config, root / "steps" / step.name / "tests", f"step {step.name!r}")
        else:
            if not (root / "instruction.md").is_file():
                raise MissingFileError("missing instruction.md")
            steps = ()
            _require_tests(root, config, root / "tests", "the task")
        instruction = steps[0] if steps else _instruction(root / "instruction.md", "instruction.md")
        compose = load_compose(root / "environment") if (root / "environment").is_dir() else None
        return cls(root=root, config=config, instruction=instruction, compose=compose, steps=steps)

    @property
    def name(self) -> str:
        """``[task].name`` if set, else the directory's name."""
        return self.config.task.name if self.config.task else self.root.name

    @property
    def warnings(self) -> list[str]:
        """task.toml's fields kept but not applied (see ``TaskConfig.warnings``), and the
        compose file's."""
        return self.config.warnings() + list(self.compose.warnings if self.compose else ())

    def for_step(self, index: int) -> "Task":
        """Step ``index`` of a multi-step task as a task of its own, as Harbor runs it: the
        step's instruction, solution/ and tests/ (else the shared tests/), its [agent]
        timeout and user where it sets them, and its artifacts beside the task's."""
        assert self.config.steps and self.step is None
        step = self.config.steps[index]
        agent = msgspec.structs.replace(
            self.config.agent, timeout_sec=step.agent.timeout_sec or self.config.agent.timeout_sec,
            user=step.agent.user if step.agent.user is not None else self.config.agent.user)
        return dataclasses.replace(self, step=step.name, instruction=self.steps[index], config=msgspec.structs.replace(
            self.config, agent=agent, artifacts=self.config.artifacts + step.artifacts))

    @property
    def has_solution(self) -> bool:
        """Whether the task ships its reference solution (solution/solve.sh; for a multi-step
        task, every step's)."""
        if self.config.steps and self.step is None:
            return all((self.root / "steps" / s.name / "solution" / "solve.sh").is_file() for s in self.config.steps)
        return (self.solution_dir / "solve.sh").is_file()

    @property
    def unsupported(self) -> list[str]:
        """What the task needs that this sandbox does not run (empty: nothing): task.toml's
        (``TaskConfig.unsupported``) and an environment with no recipe."""
        out = self.config.unsupported()
        env = self.config.environment
        for step in self.config.steps or ():
            if (self.root / "steps" / step.name / "workdir").exists():
                out.append(f"steps/{step.name}/workdir (files and setup.sh staged before a step) is not run by this "
                           "sandbox yet")
        if env.os != "windows" and not env.docker_image and self.compose is None and \
                not (self.environment_dir / "Dockerfile").is_file():
            out.append("environment/ has no Dockerfile or docker-compose file and task.toml no docker_image: "
                       "the task needs an environment provider this sandbox does not have")
        return out

    @property
    def environment_dir(self) -> Path:
        return self.root / "environment"

    @property
    def main_context(self) -> Path:
        """The folder the agent's image is built from: compose ``main``'s build, else environment/."""
        build = self.compose.main_build if self.compose else None
        return self.environment_dir / build if build else self.environment_dir

    @property
    def solution_dir(self) -> Path:
        return self.root / "steps" / self.step / "solution" if self.step else self.root / "solution"

    @property
    def tests_dir(self) -> Path:
        if self.step and (self.root / "steps" / self.step / "tests" / "test.sh").is_file():
            return self.root / "steps" / self.step / "tests"
        return self.root / "tests"


def _require_tests(root: Path, config: TaskConfig, tests: Path, who: str) -> None:
    """Harbor's rule: a step's tests/test.sh, else the shared tests/; test.bat (or .ps1,
    .cmd) for a Windows task."""
    names = WINDOWS_TESTS if config.environment.os == "windows" else ("test.sh",)
    for folder in (tests, root / "tests"):
        if any((folder / n).is_file() for n in names):
            return
    shown = " or ".join(f"tests/{n}" for n in names)
    raise MissingFileError(f"missing {shown} for {who}")


def _step_instruction(root: Path, name: str) -> str:
    step = root / "steps" / name
    if not step.resolve().is_relative_to(root) or "/" in name or name in (".", ".."):
        raise MissingFileError(f"step {name!r}: not a folder name under steps/")
    if not (step / "instruction.md").is_file():
        raise MissingFileError(f"missing steps/{name}/instruction.md")
    return _instruction(step / "instruction.md", f"steps/{name}/instruction.md")


def _instruction(path: Path, label: str) -> str:
    text = _read_text(path, "instruction.md")
    if not text.strip():
        raise EmptyInstructionError(f"{label} is empty")
    return text


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
