"""An update's training sequences packed for the trainer: per-rank shares of flat token arrays.

The orchestrator cuts the batch's sequences into one share per rank (``split_across``: about
equal token counts) and each share into micro-batches (``micro_batches``), then writes every
share once to the blob store as a ``PackedShare``: the share's sequences concatenated into
flat little-endian arrays (int32 token ids and target positions, float32 sampler log-probs,
temperatures and advantages) with the lengths that cut them apart again. A rank reads its own
share and nothing else; no rank needs the trajectories, the tokenizer or the batch plan.

float32 loses nothing the trainer kept: it builds float32 tensors from these values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec
import numpy as np

from aes_lib.learner.sequences import TrainSeq, micro_batches, split_across

if TYPE_CHECKING:
    from aes_lib.blobstore import BlobStore
    from aes_proto.messages import BlobRef

FORMAT = 1


class PackFormatError(ValueError):
    """A packed share that does not decode into consistent sequences."""


class PackedShare(msgspec.Struct, kw_only=True, frozen=True):
    format: int = FORMAT
    micro: list[int]
    """Sequences in each micro-batch, in order."""
    seq_lens: bytes
    """int32: tokens of each sequence (its slice of ``ids``)."""
    ids: bytes
    """int32: every sequence's token ids, concatenated."""
    n_targets: bytes
    """int32: trained tokens of each sequence (its slice of ``targets``, ``logprobs``, ``temperatures``)."""
    targets: bytes
    """int32: positions (within the sequence) of the trained tokens."""
    logprobs: bytes
    """float32: the sampler's log-prob of each trained token."""
    temperatures: bytes
    """float32: the sampling temperature of each trained token."""
    advantages: bytes
    """float32: each sequence's advantage."""


@dataclass(frozen=True)
class PackedBatch:
    """Where an update's shares are, as ``TrainBatch`` carries it."""

    shares: tuple[BlobRef, ...]
    share_micro: tuple[int, ...]
    n_tokens: int


def write_batch(store: BlobStore, prefix: str, seqs: list[TrainSeq], world: int,
                micro_batch_tokens: int) -> PackedBatch:
    """``seqs`` as ``world`` packed shares under ``prefix`` (``<prefix>/rank-<r>``), written once."""
    n_tokens = sum(s.n_targets for s in seqs)
    if not n_tokens:
        raise ValueError("batch has no completion tokens to train on")
    shares = [micro_batches(share, micro_batch_tokens) for share in split_across(seqs, world)]
    refs = tuple(store.put_bytes(f"{prefix}/rank-{r}", pack_share(share)) for r, share in enumerate(shares))
    return PackedBatch(refs, tuple(len(s) for s in shares), n_tokens)


def read_rank_share(store: BlobStore, shares: Sequence[BlobRef], share_micro: Sequence[int], rank: int,
                    world: int) -> tuple[list[list[TrainSeq]], int]:
    """Rank ``rank``'s micro-batches (shares ``rank::world``: a batch packed for more ranks than
    train it still trains whole) and the micro-batch count every rank runs."""
    if len(shares) != len(share_micro) or not shares:
        raise PackFormatError(f"{len(shares)} shares but {len(share_micro)} micro-batch counts")
    micro = [mb for ref in shares[rank::world] for mb in unpack_share(store.get_bytes(ref))]
    n_micro = max(sum(share_micro[r::world]) for r in range(world))
    return micro, max(n_micro, 1)


def pack_share(micro: Sequence[Sequence[TrainSeq]]) -> bytes:
    seqs = [s for mb in micro for s in mb]

    def flat(values, dtype) -> bytes:
        return np.asarray(values, dtype=dtype).tobytes()

    return msgspec.msgpack.encode(PackedShare(
        micro=[len(mb) for mb in micro],
        seq_lens=flat([s.length for s in seqs], "<i4"),
        ids=flat([i for s in seqs for i in s.ids], "<i4"),
        n_targets=flat([s.n_targets for s in seqs], "<i4"),
        targets=flat([p for s in seqs for p in s.targets], "<i4"),
        logprobs=flat([lp for s in seqs for lp in s.logprobs], "<f4"),
        temperatures=flat([t for s in seqs for t in s.temperatures], "<f4"),
        advantages=flat([s.advantage for s in seqs], "<f4"),
    ))


def unpack_share(data: bytes) -> list[list[TrainSeq]]:
    """The micro-batches of a share written by ``pack_share``."""
    try:
        p = msgspec.msgpack.decode(data, type=PackedShare)
    except msgspec.DecodeError as e:
        raise PackFormatError(f"not a packed share: {e}") from None
    if p.format != FORMAT:
        raise PackFormatError(f"packed share format {p.format}, this trainer reads {FORMAT}")
    lens, ids = np.frombuffer(p.seq_lens, "<i4"), np.frombuffer(p.ids, "<i4")
    n_t, targets = np.frombuffer(p.n_targets, "<i4"), np.frombuffer(p.targets, "<i4")
    lps, temps = np.frombuffer(p.logprobs, "<f4"), np.frombuffer(p.temperatures, "<f4")
    advs = np.frombuffer(p.advantages, "<f4")
    n = len(lens)
    if not (sum(p.micro) == n == len(n_t) == len(advs) and int(lens.sum()) == len(ids)
            and int(n_t.sum()) == len(targets) == len(lps) == len(temps)):
        raise PackFormatError("packed share's lengths do not match its arrays")
    seq_ends, tgt_ends = np.cumsum(lens), np.cumsum(n_t)
    seqs = []
    for i in range(n):
        a, b = seq_ends[i] - lens[i], seq_ends[i]
        c, d = tgt_ends[i] - n_t[i], tgt_ends[i]
        seqs.append(TrainSeq(tuple(ids[a:b].tolist()), tuple(targets[c:d].tolist()), tuple(lps[c:d].tolist()),
                             tuple(temps[c:d].tolist()), float(advs[i])))
    out, start = [], 0
    for k in p.micro:
        out.append(seqs[start:start + k])
        start += k
    return out
