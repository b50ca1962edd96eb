"""A held-out n-gram index that holds hashes only, so it can ship with the package.

``NgramIndex`` stores the held-out token ids to verify every hit, which amounts to
the benchmark's text; a public benchmark's instructions must not ship that way.
Here each token is hashed by its own bytes (not by a vocabulary number), so a
candidate is hashed without any held-out word list, and only the sorted 64-bit
window hashes, the held-out task of each and the task names are stored. Without
the text a hit cannot be verified: a false match needs a 64-bit collision
(about one in 10^14 for a 10^5-gram index and a 1,000-token candidate).

Same tokenizer, same n and same rolling window hash as ``NgramIndex``, so both
report a shared n-gram for the same candidates.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Sequence

import msgspec
import numpy as np

from aes_lib.contamination.heldout import HeldoutTask
from aes_lib.contamination.index import DEFAULT_N, IndexFormatError, Match, _window_hashes, framed, unframed
from aes_lib.contamination.tokenize import TOKENIZER_NAME, token_bytes

MAGIC = b"AESHGRAM"
_FORMAT = 1
_HASH_NAME = "blake2b64-prefixpoly64"


class Source(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Where the held-out instructions came from, recorded in the index."""

    name: str
    """The benchmark, e.g. ``Terminal-Bench core 0.1.1``."""
    repository: str
    """The public repository read, ``owner/name``."""
    commit: str
    """The commit read."""
    path: str = ""
    """What was read in it."""


class _Header(msgspec.Struct, forbid_unknown_fields=True):
    format: int
    n: int
    tokenizer: str
    hash: str
    n_docs: int
    n_entries: int
    ids_bytes: int
    sources: list[Source]


@functools.lru_cache(maxsize=1 << 16)
def _token_value(tok: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(tok, digest_size=8).digest(), "little")


def _window_keys(toks: list[bytes], n: int) -> np.ndarray:
    values = np.fromiter(map(_token_value, toks), np.uint64, len(toks))
    return _window_hashes(values, n)


class HashedIndex:
    """Sorted n-gram hashes of held-out instructions; build with :meth:`build`."""

    def __init__(self, n: int, doc_ids: list[str], hashes: np.ndarray, docs: np.ndarray,
                 sources: list[Source]) -> None:
        self.n = n
        self.doc_ids = doc_ids
        self.hashes = hashes
        self.docs = docs
        self.sources = sources

    @classmethod
    def build(cls, tasks: Iterable[HeldoutTask], sources: Sequence[Source], n: int = DEFAULT_N) -> "HashedIndex":
        if n < 1:
            raise ValueError(f"n must be positive, got {n}")
        tasks = list(tasks)
        keys = [_window_keys(token_bytes(t.instruction), n) for t in tasks]
        all_keys = np.concatenate([np.empty(0, np.uint64), *keys])
        owner = np.repeat(np.arange(len(tasks), dtype=np.uint32), [len(k) for k in keys])
        # One entry per distinct n-gram, naming the first task (in the given order) that holds it.
        hashes, first = np.unique(all_keys, return_index=True)
        return cls(n, [t.id for t in tasks], hashes, owner[first], list(sources))

    def merged(self, other: "HashedIndex") -> "HashedIndex":
        """One index holding both: a shared n-gram names this index's task, as ``build`` names the
        first. Task names must stay apart, as a hit reports only the name."""
        if other.n != self.n:
            raise IndexFormatError(f"cannot merge a {other.n}-gram index into a {self.n}-gram one")
        if clash := sorted(set(self.doc_ids) & set(other.doc_ids)):
            raise IndexFormatError(f"both indexes name held-out task {clash[0]!r} ({len(clash)} in all): "
                                   "give the added benchmark's tasks other names")
        all_hashes = np.concatenate([self.hashes, other.hashes])
        owner = np.concatenate([self.docs, other.docs.astype(np.uint32) + len(self.doc_ids)])
        hashes, first = np.unique(all_hashes, return_index=True)
        return HashedIndex(self.n, self.doc_ids + other.doc_ids, hashes, owner[first], self.sources + other.sources)

    def check(self, text: str) -> Match | None:
        """The first shared n-gram of ``text`` (in reading order), or None."""
        found = self.check_many([text], first_only=True)
        return found[0] if found else None

    def check_many(self, texts: Sequence[str], first_only: bool = True) -> list[Match]:
        """Shared n-grams of many candidates, ordered by candidate then position."""
        matches: list[Match] = []
        for i, text in enumerate(texts):
            toks = token_bytes(text)
            keys = _window_keys(toks, self.n)
            slot = np.searchsorted(self.hashes, keys)
            inside = slot < len(self.hashes)
            hit = np.zeros(len(keys), dtype=bool)
            hit[inside] = self.hashes[slot[inside]] == keys[inside]
            for pos in np.flatnonzero(hit)[: 1 if first_only else None].tolist():
                ngram = b" ".join(toks[pos : pos + self.n]).decode()
                matches.append(Match(i, pos, ngram, self.doc_ids[int(self.docs[slot[pos]])]))
        return matches

    def to_bytes(self) -> bytes:
        """Magic, header length, JSON header, hashes, task numbers, task names."""
        ids = "\n".join(self.doc_ids).encode()
        header = _Header(format=_FORMAT, n=self.n, tokenizer=TOKENIZER_NAME, hash=_HASH_NAME,
                         n_docs=len(self.doc_ids), n_entries=len(self.hashes), ids_bytes=len(ids), sources=self.sources)
        return b"".join([framed(MAGIC, header), self.hashes.astype("<u8").tobytes(), self.docs.astype("<u4").tobytes(),
                         ids])

    @classmethod
    def from_bytes(cls, data: bytes) -> "HashedIndex":
        head, pos = unframed(data, MAGIC, _Header, "hashed contamination index", _FORMAT, _HASH_NAME)
        expected = pos + 12 * head.n_entries + head.ids_bytes
        if len(data) != expected:
            raise IndexFormatError(f"hashed contamination index is {len(data)} bytes, header says {expected}")
        hashes = np.frombuffer(data, "<u8", head.n_entries, pos)
        docs = np.frombuffer(data, "<u4", head.n_entries, pos + 8 * head.n_entries)
        ids = data[pos + 12 * head.n_entries :].decode()
        doc_ids = ids.split("\n") if head.n_docs else []
        if len(doc_ids) != head.n_docs or (len(docs) and int(docs.max()) >= head.n_docs):
            raise IndexFormatError(f"hashed contamination index names {len(doc_ids)} tasks, header says {head.n_docs}")
        return cls(head.n, doc_ids, hashes, docs, head.sources)
