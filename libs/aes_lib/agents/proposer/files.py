"""The structured format the Prompt baselines reply in: every file of a task in one reply.

    === FILE: environment/Dockerfile ===
    FROM aes-base:latest
    === END ===

A path is relative to the task directory; ``..``, absolute paths and backslashes are
refused (the reply is untrusted). Fenced code wrappers inside a block are stripped.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

REQUIRED = ("instruction.md", "task.toml", "environment/Dockerfile", "solution/solve.sh")
"""tests/test.sh is the managed verifier, installed by the harness; tests/test_*.py are the model's."""

_BLOCK = re.compile(r"^=== FILE: *(?P<path>[^\n=]+?) *===[ \t]*\n(?P<body>.*?)^=== END ===[ \t]*$", re.DOTALL | re.MULTILINE)
_WRAPPED = re.compile(r"\A```[\w+-]*[ \t]*\n(.*)\n```[ \t]*\n?\Z", re.DOTALL)

MAX_FILES = 64


class FileFormatError(ValueError):
    """The reply does not hold the task's files in the expected format."""


class UnsafeFilePathError(ValueError):
    """A file path would escape the task directory."""


def format_files(files: dict[str, str]) -> str:
    """The inverse of ``parse_files``: how revisions show the model its previous files."""
    return "\n".join(f"=== FILE: {p} ===\n{body.rstrip()}\n=== END ===" for p, body in sorted(files.items()))


def _safe(path: str) -> str:
    p = PurePosixPath(path.strip())
    if "\\" in path or p.is_absolute() or not p.parts or any(part in ("..", ".", "") for part in p.parts):
        raise UnsafeFilePathError(f"refusing file path {path!r}: must be relative, inside the task directory")
    return str(p)


def parse_files(reply: str) -> dict[str, str]:
    files: dict[str, str] = {}
    for m in _BLOCK.finditer(reply):
        body = m.group("body")
        unwrapped = _WRAPPED.match(body)
        files[_safe(m.group("path"))] = (unwrapped.group(1) + "\n") if unwrapped else body
    if not files:
        raise FileFormatError("no '=== FILE: <path> ===' ... '=== END ===' blocks in the reply")
    if len(files) > MAX_FILES:
        raise FileFormatError(f"{len(files)} files; at most {MAX_FILES}")
    missing = [r for r in REQUIRED if r not in files]
    if missing:
        raise FileFormatError(f"missing required file(s): {', '.join(missing)}")
    if not any(PurePosixPath(p).parent == PurePosixPath("tests") and PurePosixPath(p).name.startswith("test_")
               and p.endswith(".py") for p in files):
        raise FileFormatError("no tests/test_*.py: the verifier needs at least one pytest file")
    return files


def write_files(files: dict[str, str], root: Path) -> Path:
    for rel, body in files.items():
        dest = root / _safe(rel)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(body)
        if dest.suffix == ".sh":
            dest.chmod(0o755)
    return root
