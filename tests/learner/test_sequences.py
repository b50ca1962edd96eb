"""Turns that extend each other train as one sequence, with the same loss as turn by turn."""

import random

import pytest
import torch

from aes_lib.learner import Batch, DppoTrainer, Group, LearnerConfig, Sample, TokenizedTurn, pack_turns

from .helpers import BOS, SEP, VOCAB, tiny_llama


def episode(turns: int, seed: int = 0) -> tuple[TokenizedTurn, ...]:
    """An agent episode: each prompt is the previous prompt + completion + a tool reply."""
    rng = random.Random(seed)
    out: list[TokenizedTurn] = []
    prompt = (BOS, *(rng.randrange(10) for _ in range(4)), SEP)
    for _ in range(turns):
        n = rng.randint(1, 3)
        completion = tuple(rng.randrange(VOCAB) for _ in range(n))
        out.append(TokenizedTurn(prompt, completion, tuple(-rng.uniform(0.5, 3.0) for _ in range(n)),
                                 rng.choice([1.0, 0.6])))
        prompt = prompt + completion + (SEP, rng.randrange(10), SEP)  # the environment's reply
    return tuple(out)


def test_pack_turns_merges_only_turns_that_extend_each_other():
    turns = episode(4)
    (merged,) = pack_turns(turns, 0.5)
    assert merged.ids == turns[-1].prompt_ids + turns[-1].completion_ids
    assert [merged.ids[p] for p in merged.targets] == [t for turn in turns for t in turn.completion_ids]
    assert merged.logprobs == tuple(lp for turn in turns for lp in turn.sampler_logprobs)
    assert merged.temperatures == tuple(turn.temperature for turn in turns for _ in turn.completion_ids)
    # A re-templated history (the prompt no longer starts with the previous sequence) starts anew.
    rewritten = TokenizedTurn((BOS, 7, SEP), (3,), (-1.0,))
    seqs = pack_turns((*turns[:2], rewritten, *turns[2:]), 0.5)
    assert [s.n_targets for s in seqs] == [sum(len(t.completion_ids) for t in turns[:2]), 1,
                                           sum(len(t.completion_ids) for t in turns[2:])]
    assert len(pack_turns(turns, 0.5, merge=False)) == 4


def test_a_merged_episode_trains_like_its_turns_one_by_one():
    samples = tuple(Sample(f"r{i}", "g", "solver", float(i), episode(6, seed=i)) for i in range(2))
    batch = Batch("solver", (Group("g", "solver", samples, (-0.5, 0.5)),), 0, 0, 0)
    results = {}
    for merge in (True, False):
        model = tiny_llama(seed=0)
        cfg = LearnerConfig(lr=1e-2, kernel_backend="torch", merge_turns=merge, micro_batch_tokens=4096,
                            max_grad_norm=0)
        stats = DppoTrainer(model, cfg).step(batch)
        results[merge] = stats, {n: p.grad for n, p in model.named_parameters()}  # kept after the step
    (merged, g_merged), (split, g_split) = results[True], results[False]
    print(f"6-turn episodes: {split.sequence_tokens} tokens turn by turn, {merged.sequence_tokens} merged "
          f"({split.sequence_tokens / merged.sequence_tokens:.2f}x); loss {merged.loss:.7f} vs {split.loss:.7f}")
    assert merged.tokens == split.tokens and merged.masked_tokens == split.masked_tokens
    assert merged.loss == pytest.approx(split.loss, rel=1e-5, abs=1e-8)
    assert merged.grad_norm == pytest.approx(split.grad_norm, rel=1e-5)
    assert merged.sequence_tokens < split.sequence_tokens / 2
    assert all(g is not None for g in g_merged.values())
    for name, g in g_merged.items():
        torch.testing.assert_close(g, g_split[name], rtol=1e-4, atol=1e-7, msg=name)
