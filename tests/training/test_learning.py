"""The policy learns through the services: waves, Docker rollouts, learner, weight sync, engine.

Nothing here calls the trainer directly. The wave planner samples the pool (two
phrasings of one task: write ``banana`` into a file), the training-rollout service
runs the solver loop in real containers against the vLLM server, the verifier
scores each attempt (1 for the right word, else 0), the learner updates on every
group with a spread, the weight sync loads each version into the engine, and the
next wave samples it. The word policy starts out choosing between two words
uniformly (mean reward about 0.5).

One engine: vLLM, the one that follows the learner wherever it trains. The torch
engine's part (it loads each version and serves the trainer's log-probs) is
``test_stack_training``'s; learning itself does not depend on which engine samples.
"""

import dataclasses
import statistics

import pytest

from aes_lib.runners.pool_store import BUCKET, PoolStore
from aes_ops.seeding import seed_pool
from aes_lib.flywheel.training import TrainingConfig
from aes_ops.waves import train
from aes_lib.learner import LearnerConfig
from aes_lib.models.weights import VLLMEngineClient
from aes_proto import subjects
from aes_proto.messages import LearnerStats, RolloutSummary, ServingUpdate
from aes_services.learner import LearnerService
from aes_services.orchestrator import OrchestratorService
from aes_services.serving import WeightSyncService
from aes_services.training import TrainingRolloutService, WavePlannerService

from conftest import TASKS, WORD_WAVES
from flywheel_helpers import running

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1200)]

WAVES = 8
LR = 2.5e-4
"""Half the first setting (5e-4), which twice collapsed the word policy after ~5 updates: the
negative advantage on the other word's suffix (` > /app/answer.txt`) taught it to repeat the word,
its replies ran past 32 tokens unclosed, and every later attempt scored 0 ("echo banana banana
banana ..." under greedy decoding of the published weights)."""
ADAM_EPS = 1e-5
"""At AdamW's default 1e-8 one update broke the reply format (words of noise after ``echo
banana``: a wave at 0.19 right after 0.94) in 4 of 30 replays of this loop, at 1e-5 in 1 of 30
(``bench/results/word_policy_stability.md``): the faintest gradients no longer step as far as
the strongest."""


@pytest.mark.vllm
async def test_mean_training_reward_rises_over_updates(fresh_nats, bus, word_policy, vllm_server, monkeypatch):
    """On the shared vLLM server, put back on the word policy first."""
    from vllm_support import reset

    await reset(vllm_server, word_policy)
    monkeypatch.setenv("AES_HOME", str(fresh_nats.home))
    monkeypatch.setenv("AES_BLOB_URL", fresh_nats.blob_location)  # where the engine reads checkpoints
    settings = dataclasses.replace(fresh_nats, model_url=vllm_server, engine="vllm")
    await seed_pool(bus, PoolStore(await bus.kv(BUCKET)), [TASKS / "word-banana", TASKS / "word-banana-alt"])
    # Sampled at temperature 0.5: the recorded log-probs are the tempered distribution's, which
    # the trainer reproduces (first update's divergence ~0).
    waves = TrainingConfig(groups_per_wave=2, group_size=8, waves_per_round=WAVES, temperature=0.5, engine_wait_s=600,
                           **WORD_WAVES)
    learner = LearnerService(LearnerConfig(model_path=str(word_policy), groups_per_batch=1, lr=LR, adam_eps=ADAM_EPS))
    async with running(settings, WavePlannerService(), TrainingRolloutService(config=waves), OrchestratorService(learner.config), learner,
                       WeightSyncService()):
        tally = await train(bus, waves, round_=1, prefix="learn", served_version=VLLMEngineClient(vllm_server).version)

    rollouts = [s for s in await bus.history(subjects.ROLLOUT_SUMMARY, RolloutSummary) if s.purpose == "training"]
    by_wave = {f"learnw{w}": [s for s in rollouts if s.episode_id == f"learnw{w}"] for w in range(WAVES)}
    means = [statistics.mean(s.reward for s in wave) for wave in by_wave.values()]
    stats = await bus.history(subjects.LEARNER_STATS, LearnerStats)
    served = await bus.history(subjects.SERVING_VERSION, ServingUpdate)
    print("\nmean training reward per wave:", " ".join(f"{m:.3f}" for m in means))
    print("policy version each wave sampled:", [sorted({s.policy_version for s in w}) for w in by_wave.values()])
    print("updates (version, batch reward, loss, masked, divergence):",
          [(s.policy_version, round(s.mean_reward, 3), round(s.loss, 4), round(s.mask_fraction, 3),
            round(s.mean_divergence, 4)) for s in stats])
    assert all(len(w) == 16 for w in by_wave.values())
    assert len(stats) == tally.updates >= WAVES // 2  # groups with a spread: up to two updates a wave
    assert max(u.version for u in served) == len(stats)  # the engine loaded every version
    # Each wave samples at least the weights every earlier wave's groups produced (an update
    # on its own first group may land mid-wave: later attempts then carry the newer version).
    for w in range(1, WAVES):
        earlier = [s.policy_version for s in stats if s.group_ids[0].split("-")[0] < f"learnw{w}"]
        assert min(s.policy_version for s in by_wave[f"learnw{w}"]) >= max(earlier, default=0)
    # Against the untrained policy's known 0.5, not the first wave's noisy 16 samples (it drew
    # 13/16 once). Over the last half of the waves, 64 attempts: averaging 0.65 or more happens
    # by chance with p < 0.01. A margin below the ~0.86 the policy reaches, because one wave can
    # collapse and recover (CI saw 0.94, 0.56, 0.88; the bench 0.88, 0.12), and one CI run learned
    # slowly (last three waves 0.56, 0.69, 0.81 at 0.7 over six waves).
    late = means[WAVES // 2:]
    assert statistics.mean(late) >= 0.65, means
