"""The blocker registry of an ask-human task: the details its instruction withholds.

``tests/blockers.json`` (hidden from the solver, like all of /tests)::

    {"blockers": [{"id": "tolerance", "type": "missing_parameters",
                   "topic": "how far two amounts may differ and still match",
                   "keywords": ["tolerance", "amount", "differ"],
                   "answer": "Amounts match when they differ by at most 0.05.",
                   "value": "TOLERANCE = 0.05", "decoy": "TOLERANCE = 0.01"}]}

``value`` is a literal of solution/solve.sh that encodes the detail and ``decoy`` what a
solver guessing would write instead; the gate runs the oracle with the decoy to prove
the tests notice.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

REGISTRY = Path("tests") / "blockers.json"
"""Where the registry lives, relative to the task folder."""
SOLVE = Path("solution") / "solve.sh"
TYPES = ("missing_parameters", "business_information", "ambiguous_requirements", "question", "schema")
"""HiL-Bench's kinds of withheld detail."""
_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_TEXT_FIELDS = ("id", "type", "topic", "answer", "value", "decoy")


class BlockerRegistryError(ValueError):
    """``tests/blockers.json`` is missing, malformed, or disagrees with solve.sh."""


@dataclasses.dataclass(frozen=True)
class Blocker:
    """One withheld detail."""

    id: str
    type: str
    topic: str
    """What the detail is about, as a judge matching a question sees it."""
    keywords: tuple[str, ...]
    """Words a question about the detail uses (the keyword matcher's evidence)."""
    answer: str
    """What ask_human replies to a question about it."""
    value: str
    """Literal in solve.sh that encodes it."""
    decoy: str
    """What a solver guessing would use instead."""


def load_blockers(task_dir: Path) -> list[Blocker]:
    """The registry of the task at ``task_dir``; ``BlockerRegistryError`` saying what is wrong."""
    path = Path(task_dir) / REGISTRY
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BlockerRegistryError(f"missing {REGISTRY}: an ask-human task lists its withheld details there") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise BlockerRegistryError(f"{REGISTRY} is not readable JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("blockers"), list) or not data["blockers"]:
        raise BlockerRegistryError(f'{REGISTRY} must be an object {{"blockers": [...]}} with at least one blocker')
    try:
        solve = (Path(task_dir) / SOLVE).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise BlockerRegistryError(f"cannot read {SOLVE} to check the blockers' values: {e}") from None
    blockers = [_blocker(i, raw, solve) for i, raw in enumerate(data["blockers"])]
    seen: set[str] = set()
    for b in blockers:
        if b.id in seen:
            raise BlockerRegistryError(f"{REGISTRY}: duplicate blocker id {b.id!r}")
        seen.add(b.id)
    return blockers


def _blocker(i: int, raw: object, solve: str) -> Blocker:
    where = f"{REGISTRY} blocker #{i}"
    if not isinstance(raw, dict):
        raise BlockerRegistryError(f"{where} must be an object, got {type(raw).__name__}")
    if unknown := sorted(set(raw) - {*_TEXT_FIELDS, "keywords"}):
        raise BlockerRegistryError(f"{where}: unknown field(s) {', '.join(unknown)}")
    for name in _TEXT_FIELDS:
        value = raw.get(name)
        if not isinstance(value, str) or not value.strip():
            raise BlockerRegistryError(f"{where}: {name!r} must be a non-empty string, got {value!r}")
    where = f"{REGISTRY} blocker {raw['id']!r}"
    if not _ID.match(raw["id"]):
        raise BlockerRegistryError(f"{where}: id must be lower-case letters, digits, '-' or '_' (at most 64)")
    if raw["type"] not in TYPES:
        raise BlockerRegistryError(f"{where}: unknown type {raw['type']!r} (one of {', '.join(TYPES)})")
    keywords = raw.get("keywords")
    if (not isinstance(keywords, list) or not keywords
            or not all(isinstance(k, str) and k.strip() for k in keywords)):
        raise BlockerRegistryError(f"{where}: 'keywords' must be a non-empty list of non-empty strings")
    if raw["value"] == raw["decoy"]:
        raise BlockerRegistryError(f"{where}: the decoy equals the value, so it proves nothing")
    if raw["value"] not in solve:
        raise BlockerRegistryError(f"{where}: value {raw['value']!r} does not occur in {SOLVE}")
    return Blocker(id=raw["id"], type=raw["type"], topic=raw["topic"].strip(),
                   keywords=tuple(k.strip().lower() for k in keywords), answer=raw["answer"].strip(),
                   value=raw["value"], decoy=raw["decoy"])
