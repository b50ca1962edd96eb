"""Novelty: how much of a task is a copy of another, by MinHash of word shingles per part.

A proposer can refill the pool with near-copies of its parent (a line added to the instruction,
the same tests). Each task is read as three parts, its instruction, its tests and its other
files (environment and solution), each tokenized as the contamination check does and cut into
``SHINGLE``-word shingles; a part's signature is ``HASHES`` minima of seeded hashes of its
shingles, so the share of equal minima between two signatures estimates the Jaccard similarity
of the two shingle sets (Broder's MinHash; the standard error is about ``sqrt(J(1-J)/HASHES)``,
0.04 at J = 0.5). The similarity of two tasks is the mean over the parts either has. The managed
verifier (``tests/test.sh`` carrying the managed marker) is left out: every task shares it.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import ClassVar

import msgspec
import numpy as np

from aes_lib.config import read_settings
from aes_lib.contamination.tokenize import token_bytes
from aes_lib.sandbox.verifier import MANAGED_HEADER

PARTS = ("instruction", "tests", "files")
SHINGLE = 5
"""Words per shingle: long enough that common phrases of task prose rarely match by chance."""
HASHES = 128
MAX_PART_BYTES = 1 << 20
"""Bytes of one part read: beyond that a data file says nothing a megabyte did not."""

_rng = np.random.default_rng(20261207)
_MUL = _rng.integers(1, 2**63, HASHES, dtype=np.uint64) | np.uint64(1)
_ADD = _rng.integers(0, 2**63, HASHES, dtype=np.uint64)


class Signature(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One task's MinHash signature: per part, ``HASHES`` minima (empty: the task has no such part)."""

    parts: dict[str, list[int]]


def signature_key(env_id: str) -> str:
    """Key of a task's ``Signature`` in ``NOVELTY_BUCKET``."""
    return f"env.{env_id}"


def task_parts(task_dir: Path) -> dict[str, str]:
    """The three parts' text: ``instruction.md``; ``tests/`` less the managed verifier; the text
    files under ``environment/`` and ``solution/``. Binary files are skipped."""
    root = Path(task_dir)
    folders = {"tests": ("tests",), "files": ("environment", "solution")}
    out = {"instruction": (root / "instruction.md").read_text(errors="replace") if (root / "instruction.md").is_file() else ""}
    for part, names in folders.items():
        chunks, size = [], 0
        for path in sorted(p for name in names for p in (root / name).rglob("*") if p.is_file()):
            raw = path.read_bytes()[: MAX_PART_BYTES - size]
            if b"\x00" in raw[:4096] or raw.startswith(MANAGED_HEADER):
                continue
            chunks.append(raw.decode(errors="replace"))
            size += len(raw)
            if size >= MAX_PART_BYTES:
                break
        out[part] = "\n".join(chunks)
    return out


def _minhash(text: str) -> list[int]:
    words = token_bytes(text)
    if not words:
        return []
    shingles = {b" ".join(words[i : i + SHINGLE]) for i in range(max(1, len(words) - SHINGLE + 1))}
    keys = np.fromiter((int.from_bytes(hashlib.blake2b(s, digest_size=8).digest(), "little") for s in shingles),
                       dtype=np.uint64, count=len(shingles))
    with np.errstate(over="ignore"):  # multiply-add modulo 2**64: the wrap-around is the hash
        return (keys[:, None] * _MUL + _ADD).min(axis=0).tolist()


def signature(task_dir: Path) -> Signature:
    return Signature({part: _minhash(text) for part, text in task_parts(task_dir).items()})


def similarity(a: Signature, b: Signature) -> dict[str, float]:
    """Estimated Jaccard similarity per part either task has (0 where only one has it), and
    ``overall``: their mean."""
    out: dict[str, float] = {}
    for part in PARTS:
        x, y = a.parts.get(part, []), b.parts.get(part, [])
        if x or y:
            out[part] = float(np.mean(np.array(x, dtype=np.uint64) == np.array(y, dtype=np.uint64))) if x and y else 0.0
    out["overall"] = sum(out.values()) / len(out) if out else 0.0
    return out


def diversity(signatures: list[Signature]) -> float | None:
    """One minus the mean pairwise similarity of a pool (1: nothing shared; None under two tasks)."""
    pairs = [similarity(a, b)["overall"] for i, a in enumerate(signatures) for b in signatures[i + 1 :]]
    return 1.0 - sum(pairs) / len(pairs) if pairs else None


class NoveltySettingsError(ValueError):
    """An ``AES_NOVELTY_*`` variable has an impossible value."""


@dataclasses.dataclass(frozen=True)
class NoveltySettings:
    """How the novelty gate compares a candidate with its parent and the pool (``AES_NOVELTY_<FIELD>``)."""

    env_prefix: ClassVar[str] = "AES_NOVELTY_"
    section: ClassVar[str] = "novelty"
    enforce: bool = False
    """Whether ``near_copy`` rejects the candidate (and sends it back). Off by default: the default
    local proposer model writes near-copies of its parent, so the verdict is recorded; turn it on
    with a capable proposer."""
    threshold: float = 0.8
    """Similarity (mean over instruction, tests and files of the estimated Jaccard of 5-word
    shingles) at or above which a candidate is a near-copy. A line added to a task's instruction
    leaves about 0.99; two different seed tasks share under 0.05."""

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold <= 1.0:
            raise NoveltySettingsError(f"AES_NOVELTY_THRESHOLD must lie in (0, 1], got {self.threshold}")

    @classmethod
    def from_env(cls) -> "NoveltySettings":
        return cls(**read_settings(cls, NoveltySettingsError))  # type: ignore[arg-type]
