"""Packed shares: the orchestrator's flat arrays train the same update as the batch itself.

Real parts: the local blob store and a tiny Llama stepped on the CPU.
"""

import msgspec
import numpy as np
import pytest
import torch

from aes_lib.blobstore import open_store
from aes_lib.learner import DppoTrainer, LearnerConfig, PackFormatError, read_rank_share, write_batch
from aes_lib.learner.packing import pack_share, unpack_share
from aes_lib.learner.sequences import TrainSeq
from aes_lib.learner.trainer import batch_sequences

from .helpers import dppo_batch, tiny_llama

CFG = LearnerConfig(lr=1e-2, kernel_backend="torch", micro_batch_tokens=48, seed=0)


def _f32(xs):
    return tuple(float(np.float32(x)) for x in xs)


def test_a_share_round_trips_its_sequences(tmp_path):
    store = open_store(f"file://{tmp_path}")
    seqs = batch_sequences(dppo_batch(), CFG.merge_turns)
    packed = write_batch(store, "b1", seqs, 3, CFG.micro_batch_tokens)
    assert len(packed.shares) == 3 and packed.n_tokens == sum(s.n_targets for s in seqs)
    got = [s for r in range(3) for mb in read_rank_share(store, packed.shares, packed.share_micro, r, 3)[0]
           for s in mb]
    want = [TrainSeq(s.ids, s.targets, _f32(s.logprobs), _f32(s.temperatures), float(np.float32(s.advantage)))
            for s in seqs]
    assert sorted(got, key=repr) == sorted(want, key=repr)  # every sequence once, in some rank's share
    # Packed for 3 ranks, trained on 2: rank 0 takes shares 0 and 2, and every rank runs the busiest count.
    micro, n_micro = read_rank_share(store, packed.shares, packed.share_micro, 0, 2)
    assert len(micro) == packed.share_micro[0] + packed.share_micro[2]
    assert n_micro == max(packed.share_micro[0] + packed.share_micro[2], packed.share_micro[1])


def test_the_packed_update_is_the_batch_update(tmp_path):
    store = open_store(f"file://{tmp_path}")
    batch = dppo_batch()
    packed = write_batch(store, "b1", batch_sequences(batch, CFG.merge_turns), 1, CFG.micro_batch_tokens)
    direct, via_store = DppoTrainer(tiny_llama(seed=0), CFG), DppoTrainer(tiny_llama(seed=0), CFG)
    a = direct.step(batch)
    micro, n_micro = read_rank_share(store, packed.shares, packed.share_micro, 0, 1)
    b = via_store.step_micro(micro, packed.n_tokens, n_micro)
    assert (a.tokens, a.masked_tokens, a.sequence_tokens) == (b.tokens, b.masked_tokens, b.sequence_tokens)
    assert b.loss == pytest.approx(a.loss, rel=1e-6) and b.grad_norm == pytest.approx(a.grad_norm, rel=1e-6)
    for (name, x), y in zip(direct.model.state_dict().items(), via_store.model.state_dict().values()):
        assert torch.equal(x, y), name


def test_a_damaged_share_is_refused_with_its_reason():
    with pytest.raises(PackFormatError, match="not a packed share"):
        unpack_share(b"\x00garbage")
    seq = TrainSeq((1, 2, 3), (2,), (-1.0,), (1.0,), 0.5)
    good = pack_share([[seq]])
    raw = msgspec.msgpack.decode(good)
    raw["micro"] = [2]
    with pytest.raises(PackFormatError, match="lengths do not match"):
        unpack_share(msgspec.msgpack.encode(raw))
    raw["micro"], raw["format"] = [1], 99
    with pytest.raises(PackFormatError, match="format 99"):
        unpack_share(msgspec.msgpack.encode(raw))
