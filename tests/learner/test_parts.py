"""Trajectory conversion, checkpoints and the trainer's token alignment."""

import pytest
import torch

from aes_proto.trajectory import Trajectory, Turn
from aes_lib.blobstore import open_store
from aes_lib.learner import (
    CheckpointError,
    DppoTrainer,
    LearnerConfig,
    TokenizedTurn,
    TrajectoryFormatError,
    load_tensors,
    write_hf_folder,
    turns_from_trajectory,
)
from aes_lib.learner.sequences import TrainSeq, micro_batches, pack_turns

from .helpers import tiny_llama


def test_turns_from_trajectory_skips_empty_turns_and_rejects_mismatched_logprobs():
    ok = Turn(index=0, reply="a", prompt_token_ids=[1, 2], completion_token_ids=[3, 4], completion_logprobs=[-0.1, -2.0])
    empty = Turn(index=1, reply="", prompt_token_ids=[1], completion_token_ids=[], completion_logprobs=[])
    traj = Trajectory(rollout_id="r", role="solver", turns=[ok, empty])
    assert turns_from_trajectory(traj) == (TokenizedTurn((1, 2), (3, 4), (-0.1, -2.0)),)
    bad = Turn(index=2, reply="b", prompt_token_ids=[1], completion_token_ids=[3, 4], completion_logprobs=[-0.1])
    with pytest.raises(TrajectoryFormatError, match="trajectory r turn 2: 2 completion ids but 1 log-probs"):
        turns_from_trajectory(Trajectory(rollout_id="r", role="solver", turns=[bad]))
    with pytest.raises(TrajectoryFormatError, match="<= 0"):
        TokenizedTurn((1,), (2,), (0.5,))


def test_checkpoint_folder_roundtrip(tmp_path):
    from aes_lib.checkpoints import fetch_folder, publish_folder
    from aes_lib.learner import policy_tensors

    store = open_store(f"file://{tmp_path / 'blobs'}")
    src, dst = tiny_llama(seed=1), tiny_llama(seed=2)
    write_hf_folder(src.state_dict(), src.config, tmp_path / "v1", dtype=torch.float32)
    ref = publish_folder(store, "ck/v1", tmp_path / "v1")
    load_tensors(dst, policy_tensors(store, ref))
    for (k, a), (_, b) in zip(src.state_dict().items(), dst.state_dict().items()):
        assert torch.equal(a, b), k
    with pytest.raises(CheckpointError, match="does not fit the model"):
        load_tensors(torch.nn.Linear(3, 3), policy_tensors(store, ref))
    # bf16 publishing halves the folder; transformers reads the dtype from its config
    write_hf_folder(src.state_dict(), src.config, tmp_path / "bf16", dtype=torch.bfloat16)
    ref = publish_folder(store, "ck/bf16", tmp_path / "bf16")
    from transformers import AutoModelForCausalLM

    loaded = AutoModelForCausalLM.from_pretrained(fetch_folder(store, ref, tmp_path / "got"))
    assert loaded.dtype == torch.bfloat16
    assert torch.equal(loaded.lm_head.weight, src.lm_head.weight.to(torch.bfloat16))


def test_trainer_logprobs_are_the_models_next_token_logprobs():
    # The gathered positions must be the ones predicting each completion token.
    model = tiny_llama(seed=3)
    trainer = DppoTrainer(model, LearnerConfig(kernel_backend="torch"))
    turns = [TokenizedTurn((10, 4, 11), (5, 12), (-1.0, -1.0)), TokenizedTurn((10, 7, 11, 3), (8,), (-1.0,))]
    seqs = pack_turns(turns[:1], 0.5) + pack_turns(turns[1:], -0.5)
    logp, mu, adv, valid = trainer._token_logprobs(seqs)
    with torch.no_grad():
        expected = []
        for t in turns:
            ids = torch.tensor([t.prompt_ids + t.completion_ids])
            lp = model(input_ids=ids).logits[0].float().log_softmax(-1)
            p = len(t.prompt_ids)
            expected += [lp[p - 1 + j, c].item() for j, c in enumerate(t.completion_ids)]
    torch.testing.assert_close(logp.detach(), torch.tensor(expected), atol=1e-5, rtol=1e-5)
    assert adv.tolist() == [0.5, 0.5, -0.5] and mu.tolist() == [-1.0, -1.0, -1.0] and valid.tolist() == [1.0] * 3


def test_micro_batches_respect_the_padded_token_budget():
    t = lambda n: TrainSeq(tuple(range(n)), (n - 1,), (-1.0,), (1.0,), 0.0)  # noqa: E731
    sizes = [len(mb) for mb in micro_batches([t(4), t(4), t(8), t(2)], max_tokens=16)]
    assert sizes == [2, 2]  # 4+4 fits (2x4=8); adding 8 would pad to 3x8; then 8 and 2 pad to 2x8=16
