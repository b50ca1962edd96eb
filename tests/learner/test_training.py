"""DPPO trains a tiny Llama on a verifiable task on the CPU, end to end.

Task: the prompt is ``BOS d SEP``; reward 1 when the first completion token is the
digit ``(d + 1) % 10``. The rollout side is the serving engine (``TorchEngine``)
over a separate copy of the model: it samples with its own log-probs and reloads
published checkpoints every second update, so training data is up to two versions
stale: the ratio and the DPPO mask have real work to do.
"""

import logging
import random

import pytest
import torch

from aes_lib.blobstore import open_store
from aes_lib.config import Settings
from aes_lib.learner import (
    Batcher,
    DppoTrainer,
    LearnerConfig,
    LearnerConfigError,
    Sample,
    TokenizedTurn,
    policy_tensors,
    write_hf_folder,
)
from aes_lib.models.engine import GenRequest, TorchEngine
from aes_lib.weights.store import StoreTransport
from aes_lib.weights.transport import VersionMeta
from aes_proto import subjects

from .helpers import BOS, EOS, SEP, RecordingContext, tiny_llama

log = logging.getLogger(__name__)

STEPS = 40
SYNC_EVERY = 2


async def test_dppo_raises_reward_on_digit_successor_task(tmp_path):
    random.seed(0)
    seeds = random.Random(1)  # sampling seeds, apart from the task stream
    config = LearnerConfig(solver_group_size=8, groups_per_batch=6, lr=1e-2, max_grad_norm=1.0, seed=0)
    learner_model = tiny_llama(seed=0)
    rollout = TorchEngine(tiny_llama(seed=0))
    rollout.model.load_state_dict(learner_model.state_dict())
    trainer = DppoTrainer(learner_model, config)
    batcher = Batcher(config)
    store = open_store(f"file://{tmp_path / 'blobs'}")
    ctx = RecordingContext(Settings(home=tmp_path), store)

    attempt_rewards: list[float] = []  # every sampled attempt of a step, kept or dropped
    history = []
    group_seq = 0
    for step in range(STEPS):
        rewards_this_step: list[float] = []
        while (batch := batcher.next_batch()) is None:
            d = random.randrange(10)
            prompt = [BOS, d, SEP]
            attempts = [rollout.submit(GenRequest(tuple(prompt), max_tokens=2, seed=seeds.randrange(2**31)))
                        for _ in range(config.solver_group_size)]
            for i, c in enumerate(a.result() for a in attempts):
                reward = float(c.token_ids[0] == (d + 1) % 10)
                rewards_this_step.append(reward)
                batcher.add(Sample(f"g{group_seq}-{i}", f"g{group_seq}", "solver", reward,
                                   (TokenizedTurn(tuple(prompt), tuple(c.token_ids), tuple(c.logprobs)),),
                                   policy_version=rollout.version))
            group_seq += 1
        stats = trainer.step(batch)
        attempt_rewards.append(sum(rewards_this_step) / len(rewards_this_step))
        history.append((stats, batch))
        log.info("step %d reward %.3f loss %.4f masked %d/%d (%.3f) div %.4f dropped %d",
                 step, attempt_rewards[-1], stats.loss, stats.masked_tokens, stats.tokens,
                 stats.mask_fraction, stats.mean_divergence, batch.dropped)
        if (step + 1) % SYNC_EVERY == 0:
            async def write(folder):
                write_hf_folder(learner_model.state_dict(), learner_model.config, folder, dtype=torch.float32)

            msg = await StoreTransport().publish(ctx, write, VersionMeta(
                version=step + 1, prefix=config.checkpoint_prefix, base_model="tiny-llama", run_id="test"))
            assert rollout.load_state_dict(policy_tensors(store, msg.checkpoint), msg.version)

    first, last = attempt_rewards[:5], attempt_rewards[-5:]
    first_mean, last_mean = sum(first) / 5, sum(last) / 5
    log.info("mean reward first 5 steps %.3f, last 5 steps %.3f", first_mean, last_mean)
    assert last_mean > first_mean + 0.3, (first_mean, last_mean)

    # Divergence statistics are reported, and the mask did fire on the stale samples.
    total_masked = sum(s.masked_tokens for s, _ in history)
    assert total_masked > 0
    assert all(0.0 <= s.mask_fraction <= 1.0 and s.mean_divergence >= 0.0 for s, _ in history)
    # Oversampling: all-wrong (and later all-right) groups were dropped, batches still filled.
    assert sum(b.dropped for _, b in history) > 0
    assert all(len(b.groups) == config.groups_per_batch for _, b in history)
    # Checkpoints were published as policy versions the rollout side followed.
    versions = [m.version for subj, m in ctx.published if subj == subjects.POLICY_VERSION]
    assert versions == list(range(SYNC_EVERY, STEPS + 1, SYNC_EVERY))
    assert rollout.version == STEPS
    rollout.close()


@pytest.mark.parametrize("eps, bound", [(1e-8, (0.99, 1.01)), (1.0, (0.0, 0.01))])
def test_adam_eps_sets_how_far_a_faint_gradient_moves_a_weight(eps, bound):
    """One update on a group of two replies: at the default epsilon the typical weight steps
    ``lr`` however faint its gradient (AdamW divides by the gradient's own size); at an epsilon
    far above the gradients it steps a sliver of ``lr``. The median step of the weights that
    moved, in units of ``lr``."""
    lr = 1e-3
    model = tiny_llama(seed=0)
    before = [p.detach().clone() for p in model.parameters()]
    batcher = Batcher(LearnerConfig(solver_group_size=2, groups_per_batch=1))
    prompt = (BOS, 3, SEP)
    for i, (answer, reward) in enumerate([(4, 1.0), (7, 0.0)]):
        batcher.add(Sample(f"g-{i}", "g", "solver", reward, (TokenizedTurn(prompt, (answer, EOS), (-2.7, -2.7)),)))
    trainer = DppoTrainer(model, LearnerConfig(lr=lr, adam_eps=eps, max_grad_norm=0))
    trainer.step(batcher.next_batch())
    steps = torch.cat([(p.detach() - b).abs().flatten() for p, b in zip(model.parameters(), before)])
    assert bound[0] * lr <= float(steps[steps > 0].median()) <= bound[1] * lr


def test_adam_eps_must_be_positive():
    with pytest.raises(LearnerConfigError, match="adam_eps must be > 0"):
        LearnerConfig(adam_eps=0.0)
