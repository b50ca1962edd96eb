"""Reading held-out benchmark instructions: a folder of Harbor tasks or a JSONL file."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import msgspec


class HeldoutFormatError(ValueError):
    """The held-out source is unusable: missing, empty, malformed or with duplicate ids."""


@dataclasses.dataclass(frozen=True)
class HeldoutTask:
    id: str
    """Name reported on a match: the task folder (relative to the source) or the JSONL ``id``."""
    instruction: str
    """The task's instruction text."""


class _JsonlRow(msgspec.Struct):
    # Extra fields (category, difficulty...) are allowed and ignored.
    id: str
    instruction: str


def load_heldout(source: Path) -> list[HeldoutTask]:
    """Held-out tasks from ``source``.

    A folder: every ``instruction.md`` below it is one task, named by its folder
    relative to ``source`` (``source`` itself when it is a single task). A file:
    JSON Lines, one ``{"id": ..., "instruction": ...}`` object per non-blank line.
    """
    source = Path(source)
    if source.is_dir():
        tasks = _from_folder(source)
    elif source.is_file():
        tasks = _from_jsonl(source)
    else:
        raise HeldoutFormatError(f"{source}: no such file or folder")
    if not tasks:
        raise HeldoutFormatError(f"{source}: no held-out instructions found")
    seen: set[str] = set()
    for t in tasks:
        if t.id in seen:
            raise HeldoutFormatError(f"{source}: duplicate held-out id {t.id!r}")
        if not t.id or "\n" in t.id:
            raise HeldoutFormatError(f"{source}: held-out id {t.id!r} is empty or contains a newline")
        seen.add(t.id)
    return tasks


def _from_folder(root: Path) -> list[HeldoutTask]:
    tasks = []
    for path in sorted(root.rglob("instruction.md")):
        rel = path.parent.relative_to(root).as_posix()
        task_id = root.resolve().name if rel == "." else rel
        tasks.append(HeldoutTask(task_id, path.read_text(encoding="utf-8", errors="replace")))
    return tasks


def _from_jsonl(path: Path) -> list[HeldoutTask]:
    decoder = msgspec.json.Decoder(_JsonlRow)
    tasks = []
    with path.open("rb") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = decoder.decode(line)
            except (msgspec.DecodeError, msgspec.ValidationError) as e:
                raise HeldoutFormatError(f"{path}:{lineno}: {e}") from e
            tasks.append(HeldoutTask(row.id, row.instruction))
    return tasks
