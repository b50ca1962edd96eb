"""A compact 13-gram index of held-out instructions and the contamination check.

Layout: every distinct held-out token gets an id (``vocab``); the held-out
instructions are stored as one array of token ids (``tokens``) cut by ``offsets``.
Each n-gram window (stride 1, never across two instructions) is keyed by a 64-bit
hash of its ids; the keys are sorted (``hashes``) next to the window's start in
``tokens`` (``starts``).

A check first rules out (almost) every clean candidate cheaply, then checks the
rest exactly:

- the cheap test: a set of every held-out k-gram (k = (n+1)//2, as text) is probed
  with the candidate's k-grams at positions 0, k, 2k...: any shared n-gram holds one
  of them whole (skipped for held-out sets too large to hold it, see
  ``_ANCHOR_MAX_TOKENS``: then every candidate takes the exact check).
- the exact check maps the candidate's tokens to ids (any token the held-out set
  never uses gets one shared "unknown" id), hashes every window with a few
  vectorized passes (one prefix sum, whatever n), drops almost every window with a
  one-byte prefilter, binary-searches the rest, and verifies each hit token by token
  against the stored ids: a hash collision, or a window holding an unknown token,
  can never produce a report. The work is linear in the candidate's length.

Python and numpy only: against 100,000 held-out instructions a candidate is checked in
~0.4 ms (1.7 ms at worst), thousands of times inside what the gate needs; the C
extension this once had was faster still but not needed
(``bench/results/contamination_scale_bench.md``).
"""

from __future__ import annotations

import dataclasses
import functools
import struct
from collections.abc import Iterable, Sequence
from itertools import repeat
from typing import TypeVar

import msgspec
import numpy as np

from aes_lib.contamination.heldout import HeldoutTask
from aes_lib.contamination.tokenize import TOKENIZER_NAME, token_bytes

DEFAULT_N = 13
"""Window length in tokens (the protocol's contamination rule)."""

H = TypeVar("H", bound=msgspec.Struct)


def framed(magic: bytes, header: msgspec.Struct) -> bytes:
    """An index file's start: ``magic``, the JSON header's length, the header, padded so the
    arrays after it are 8-byte aligned."""
    raw = msgspec.json.encode(header)
    raw += b" " * (-(len(magic) + 4 + len(raw)) % 8)
    return magic + struct.pack("<I", len(raw)) + raw


def unframed(data: bytes, magic: bytes, header: type[H], what: str, fmt: int, hash_name: str) -> tuple[H, int]:
    """``framed``'s header back (it must name this ``fmt``, tokenizer and ``hash_name``) and where
    the arrays start."""
    if data[: len(magic)] != magic or len(data) < len(magic) + 4:
        raise IndexFormatError(f"not a {what} (bad magic)")
    (hlen,) = struct.unpack_from("<I", data, len(magic))
    pos = len(magic) + 4
    try:
        head = msgspec.json.decode(data[pos : pos + hlen], type=header)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise IndexFormatError(f"{what} header: {e}") from e
    if (head.format, head.tokenizer, head.hash) != (fmt, TOKENIZER_NAME, hash_name):
        raise IndexFormatError(f"{what} format {head.format}/{head.tokenizer}/{head.hash} "
                               f"is not {fmt}/{TOKENIZER_NAME}/{hash_name}: rebuild it")
    return head, pos + hlen


_MAGIC = b"AESNGRAM"
_FORMAT = 1
_HASH_NAME = "splitmix64-prefixpoly64"
_BASE = 0x9E3779B97F4A7C15  # odd, hence invertible mod 2^64
_BASE_INV = pow(_BASE, -1, 1 << 64)
_BATCH_TOKENS = 1 << 20  # bound on memory per vectorized pass of check_many
_FILTER_BITS = (16, 24)  # prefilter size range: 2^16..2^24 one-byte slots, ~16 per n-gram
_ANCHOR_MAX_TOKENS = 5_000_000  # the k-gram set costs ~100 bytes a held-out token: above this, skip it


class IndexFormatError(ValueError):
    """Bytes that are not an index this code wrote (bad magic, version, tokenizer or size)."""


@dataclasses.dataclass(frozen=True)
class Match:
    """One n-gram shared by a candidate and a held-out instruction."""

    candidate: int
    """Position of the candidate in the checked sequence (0 for a single check)."""
    position: int
    """Token offset of the n-gram in the candidate."""
    ngram: str
    """The shared tokens joined by single spaces."""
    heldout_id: str
    """The held-out task that contains it."""


class _Header(msgspec.Struct, forbid_unknown_fields=True):
    format: int
    n: int
    tokenizer: str
    hash: str
    n_docs: int
    n_tokens: int
    n_entries: int
    vocab_bytes: int
    ids_bytes: int


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer: spreads small token ids over 64 bits (uint64 wraps)."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


_powers = (np.ones(1, np.uint64), np.ones(1, np.uint64))


def _powers_upto(length: int) -> tuple[np.ndarray, np.ndarray]:
    """BASE^t and BASE^-t mod 2^64 for t < length (cached, grown by doubling)."""
    global _powers
    if len(_powers[0]) < length:
        size = 1 << (length - 1).bit_length()
        factors = [np.full(size, b, np.uint64) for b in (_BASE, _BASE_INV)]
        for f in factors:
            f[0] = 1
        _powers = tuple(np.cumprod(f, dtype=np.uint64) for f in factors)
    return _powers


def _window_hashes(mixed: np.ndarray, n: int) -> np.ndarray:
    """Hash of every length-``n`` window: sum_k mixed[j+k] * BASE^-k mod 2^64.

    One prefix sum of ``mixed[t] * BASE^-t`` gives every window as a difference of
    two prefixes times ``BASE^j``: a handful of vectorized passes whatever ``n``.
    """
    m = len(mixed) - n + 1
    if m <= 0:
        return np.empty(0, dtype=np.uint64)
    pw, pinv = _powers_upto(len(mixed) + 1)
    prefix = np.zeros(len(mixed) + 1, dtype=np.uint64)
    np.cumsum(mixed * pinv[: len(mixed)], out=prefix[1:])
    return (prefix[n:] - prefix[:m]) * pw[:m]


def _encode(texts: list[str]) -> tuple[list[bytes], np.ndarray, np.ndarray]:
    """Vocabulary (in order of first use), token count per text and token ids, with C-level
    passes of Python builtins rather than a Python loop per token."""
    lengths: list[int] = []
    all_toks: list[bytes] = []
    for text in texts:
        toks = token_bytes(text)
        lengths.append(len(toks))
        all_toks += toks
    distinct = list(dict.fromkeys(all_toks))
    lookup = dict(zip(distinct, range(len(distinct))))
    ids = np.fromiter(map(lookup.__getitem__, all_toks), np.uint32, len(all_toks))
    return distinct, np.array(lengths, np.int64), ids


def _sort_by_hash(hashes: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Entries (given in ``starts`` order) sorted by hash, equal hashes (a repeated n-gram) kept
    in ``starts`` order so that a match names the first held-out instruction holding it.
    An unstable argsort plus a fix-up of the rare ties is ~2x faster than a stable sort."""
    order = np.argsort(hashes)
    hashes, starts = hashes[order], starts[order]
    tied = np.flatnonzero(hashes[1:] == hashes[:-1])
    if len(tied):
        tied = np.union1d(tied, tied + 1)
        starts[tied] = starts[tied][np.lexsort((starts[tied], hashes[tied]))]
    return hashes, starts


class NgramIndex:
    """Held-out n-grams; build with :meth:`build`, persist with :meth:`to_bytes` / :meth:`from_bytes`."""

    def __init__(
        self,
        n: int,
        vocab: list[str],
        doc_ids: list[str],
        offsets: np.ndarray,
        token_ids: np.ndarray,
        hashes: np.ndarray,
        starts: np.ndarray,
    ) -> None:
        self.n = n
        self.vocab = vocab
        self.doc_ids = doc_ids
        self.offsets = offsets
        self.token_ids = token_ids
        self.hashes = hashes
        self.starts = starts
        self._lookup = {tok.encode(): i for i, tok in enumerate(vocab)}
        # Token id -> 64-bit value; the extra last slot stands for any unknown token.
        self._unknown = len(vocab)
        self._separator = np.array([self._unknown], np.int64)
        self._mixed = _mix(np.arange(len(vocab) + 1, dtype=np.uint64))
        # Prefilter: one byte per slot of the hash's top bits, so that most windows
        # are ruled out by one lookup instead of a binary search.
        bits = min(max((16 * len(hashes)).bit_length(), _FILTER_BITS[0]), _FILTER_BITS[1])
        self._shift = np.uint64(64 - bits)
        self._filter = np.zeros(1 << bits, dtype=bool)
        self._filter[hashes >> self._shift] = True

    # -- building -----------------------------------------------------------------

    @classmethod
    def build(cls, tasks: Iterable[HeldoutTask], n: int = DEFAULT_N) -> "NgramIndex":
        if n < 1:
            raise ValueError(f"n must be positive, got {n}")
        tasks = list(tasks)
        doc_ids = [task.id for task in tasks]
        vocab, lengths, token_ids = _encode([task.instruction for task in tasks])
        offsets = np.concatenate([np.zeros(1, np.uint64), np.cumsum(lengths, dtype=np.uint64)])
        if len(token_ids) >= 2**32:
            raise ValueError(f"held-out set too large for 32-bit offsets: {len(token_ids)} tokens")
        mixed = _mix(np.arange(len(vocab), dtype=np.uint64))

        all_hashes = _window_hashes(mixed[token_ids], n)
        window_starts = np.arange(len(all_hashes), dtype=np.uint64)
        # A window is kept only if it ends inside the instruction it starts in.
        doc_end = np.repeat(offsets[1:], lengths)[: len(all_hashes)]
        inside = window_starts + np.uint64(n) <= doc_end
        hashes, starts = all_hashes[inside], window_starts[inside].astype(np.uint32)
        hashes, starts = _sort_by_hash(hashes, starts)
        return cls(n, [tok.decode() for tok in vocab], doc_ids, offsets, token_ids, hashes, starts)

    # -- checking -----------------------------------------------------------------

    def check(self, text: str) -> Match | None:
        """The first shared n-gram of ``text`` (in reading order), or None."""
        found = self.check_many([text], first_only=True)
        return found[0] if found else None

    def check_many(self, texts: Sequence[str], first_only: bool = True) -> list[Match]:
        """Shared n-grams of many candidates, ordered by candidate then position.

        ``first_only`` keeps at most one match per candidate (what admission needs);
        otherwise every matching window is reported once.
        """
        matches: list[Match] = []
        batch: list[np.ndarray] = []
        which: list[int] = []
        size = 0
        for i, text in enumerate(texts):
            toks = token_bytes(text)
            if not self._may_share(toks):
                continue
            batch.append(np.fromiter(map(self._lookup.get, toks, repeat(self._unknown)), np.int64, len(toks)))
            which.append(i)
            size += len(toks) + 1
            if size >= _BATCH_TOKENS:
                matches += self._check_ids(batch, which, first_only)
                batch, which, size = [], [], 0
        if batch:
            matches += self._check_ids(batch, which, first_only)
        return matches

    @functools.cached_property
    def _anchors(self) -> frozenset[bytes] | None:
        """Every held-out k-gram as its tokens joined by spaces (None when too large to hold).
        Built on first use: it is derived from the stored arrays, never stored."""
        if len(self.token_ids) > _ANCHOR_MAX_TOKENS:
            return None
        k = (self.n + 1) // 2
        vocab = [tok.encode() for tok in self.vocab]
        grams: set[bytes] = set()
        for lo, hi in zip(self.offsets[:-1].tolist(), self.offsets[1:].tolist()):
            toks = [vocab[i] for i in self.token_ids[lo:hi].tolist()]
            grams.update(map(b" ".join, zip(*(toks[j:] for j in range(k)))))
        return frozenset(grams)

    def _may_share(self, toks: list[bytes]) -> bool:
        """False only when ``toks`` surely shares no n-gram: a shared window [p, p+n) holds the
        k-gram at the first multiple of k from p whole, since k-1 + k <= n."""
        if self._anchors is None:
            return True
        k = (self.n + 1) // 2
        return not self._anchors.isdisjoint(map(b" ".join, zip(*[iter(toks)] * k)))

    def _check_ids(self, batch: list[np.ndarray], which: list[int], first_only: bool) -> list[Match]:
        n = self.n
        # One array for the whole batch, candidates separated by the unknown-token id. A
        # window holding an unknown token (or a separator) cannot pass verification, so
        # it needs no masking: at worst it costs one lookup.
        ids = np.concatenate([part for piece in batch for part in (piece, self._separator)])
        cand_starts = np.cumsum([0] + [len(piece) + 1 for piece in batch[:-1]])
        if len(ids) < n or len(self.hashes) == 0:
            return []
        h = _window_hashes(self._mixed[ids], n)
        positions = np.flatnonzero(self._filter[h >> self._shift])
        h = h[positions]
        slot = np.searchsorted(self.hashes, h)
        in_range = slot < len(self.hashes)
        hit = np.zeros(len(h), dtype=bool)
        hit[in_range] = self.hashes[slot[in_range]] == h[in_range]

        matches: list[Match] = []
        done: set[int] = set()
        for k in np.flatnonzero(hit):
            pos = int(positions[k])
            cand = int(np.searchsorted(cand_starts, pos, side="right") - 1)
            if first_only and cand in done:
                continue
            window = ids[pos : pos + n]
            doc = self._verify(window, h[k], int(slot[k]))
            if doc is None:
                continue  # a hash collision, not a shared n-gram
            done.add(cand)
            ngram = " ".join(self.vocab[int(t)] for t in window)
            matches.append(Match(which[cand], pos - int(cand_starts[cand]), ngram, self.doc_ids[doc]))
        return matches

    def _verify(self, window: np.ndarray, key: np.uint64, slot: int) -> int | None:
        """Index of the held-out instruction holding exactly ``window``, scanning equal keys."""
        n = self.n
        while slot < len(self.hashes) and self.hashes[slot] == key:
            start = int(self.starts[slot])
            if np.array_equal(self.token_ids[start : start + n], window):
                return int(np.searchsorted(self.offsets, start, side="right") - 1)
            slot += 1
        return None

    # -- persistence ----------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """Compact little-endian binary: magic, header length, JSON header, arrays, strings."""
        vocab = "\n".join(self.vocab).encode()
        doc_ids = "\n".join(self.doc_ids).encode()
        header = _Header(format=_FORMAT, n=self.n, tokenizer=TOKENIZER_NAME, hash=_HASH_NAME,
                         n_docs=len(self.doc_ids), n_tokens=len(self.token_ids), n_entries=len(self.hashes),
                         vocab_bytes=len(vocab), ids_bytes=len(doc_ids))
        return b"".join(
            [
                framed(_MAGIC, header),
                self.offsets.astype("<u8").tobytes(),
                self.hashes.astype("<u8").tobytes(),
                self.token_ids.astype("<u4").tobytes(),
                self.starts.astype("<u4").tobytes(),
                vocab,
                doc_ids,
            ]
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> "NgramIndex":
        """Inverse of :meth:`to_bytes`; arrays are views of ``data`` (no copy)."""
        head, pos = unframed(data, _MAGIC, _Header, "contamination index", _FORMAT, _HASH_NAME)
        expected = pos + 8 * (head.n_docs + 1) + 8 * head.n_entries + 4 * head.n_tokens
        expected += 4 * head.n_entries + head.vocab_bytes + head.ids_bytes
        if len(data) != expected:
            raise IndexFormatError(f"contamination index is {len(data)} bytes, header says {expected}")

        def take(dtype: str, count: int) -> np.ndarray:
            nonlocal pos
            arr = np.frombuffer(data, dtype=dtype, count=count, offset=pos)
            pos += arr.nbytes
            return arr

        offsets = take("<u8", head.n_docs + 1)
        hashes = take("<u8", head.n_entries)
        token_ids = take("<u4", head.n_tokens)
        starts = take("<u4", head.n_entries)
        vocab_raw = data[pos : pos + head.vocab_bytes].decode()
        pos += head.vocab_bytes
        ids_raw = data[pos : pos + head.ids_bytes].decode()
        vocab = vocab_raw.split("\n") if head.vocab_bytes else []
        doc_ids = ids_raw.split("\n") if head.n_docs else []
        return cls(head.n, vocab, doc_ids, offsets, token_ids, hashes, starts)
