"""The learner against the real bundled SmolLM2: export, token alignment, one update.

The sampler (xllamacpp serving the GGUF) records each completion token's id and
log-prob; the trainer (the same weights dequantized into transformers) recomputes
them from the recorded prompt ids. If the ids were misaligned by one position or
the chat template differed, the two would disagree wildly; a matching pipeline
leaves only the quantization/numerics gap, which is what the DPPO mask bounds.
"""

import math

import pytest
import torch

from aes_kernels.reference import binary_divergence
from aes_lib.learner import Batcher, DppoTrainer, LearnerConfig, Sample, TokenizedTurn
from aes_lib.learner.base_model import bundled_base_model
from aes_lib.learner import pack_turns
from aes_lib.models import ChatClient
from aes_lib.models.serve import spawn

pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def smollm2_folder(tmp_path_factory):
    return bundled_base_model(tmp_path_factory.mktemp("home"))


async def test_trainer_logprobs_match_the_sampler_and_one_update_runs(smollm2_folder, tmp_path):
    from transformers import AutoModelForCausalLM

    with spawn(tmp_path / "url", tmp_path / "server.log") as url:
        client = ChatClient(url, "smollm2-135m")
        turns = [await client.chat([{"role": "user", "content": f"What is {a} + {b}? Answer with a number."}],
                                   max_tokens=24, temperature=1.0, seed=a)
                 for a, b in ((2, 3), (7, 5), (10, 4), (6, 6))]
    tokenized = [TokenizedTurn(tuple(t.prompt_token_ids), tuple(t.completion_token_ids), tuple(t.completion_logprobs))
                 for t in turns]
    assert all(t.completion_ids for t in tokenized)

    model = AutoModelForCausalLM.from_pretrained(smollm2_folder, dtype=torch.float32)
    config = LearnerConfig(solver_group_size=4, groups_per_batch=1, lr=1e-5)
    trainer = DppoTrainer(model, config)
    with torch.no_grad():
        logp, mu, _, _ = trainer._token_logprobs([s for t in tokenized for s in pack_turns([t], 0.0)])
    tv = binary_divergence(logp.exp(), mu.exp(), "tv")
    print(f"tokens {logp.numel()}, mean |pi - mu| {tv.mean():.4f}, max {tv.max():.4f}, "
          f"mean |logpi - logmu| {(logp - mu).abs().mean():.4f}")
    assert tv.mean().item() < 0.05, "sampler and trainer disagree: token ids or template misaligned"

    batcher = Batcher(config)
    for i, t in enumerate(tokenized):
        batcher.add(Sample(f"r{i}", "g", "solver", float(i % 2), (t,)))
    stats = trainer.step(batcher.next_batch())
    assert stats.tokens == logp.numel() and math.isfinite(stats.loss) and stats.grad_norm > 0
