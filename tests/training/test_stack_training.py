"""The training loop on the embedded stack: real NATS, Docker, and the torch engine.

``aes up`` starts nats-server, the torch engine serving the tiny model and the training
services as processes. Two waves run on a task whose verifier scores at random
(``coin``: groups always have a spread, so the learner must update; learning is
``test_learning``'s subject). Checked: the learner made an update, the engine
reports serving it, the second wave's trajectories were sampled from it, and the
log-probs the engine now serves for a fixed prompt changed and are the trainer's
under the new weights. The tiny model keeps this about the stack's wiring: with SmolLM2 (updates
and 621 MiB checkpoints) it took 170-260 s of the suite's time; SmolLM2's trainer and sampler
agree in ``tests/learner/test_smollm2.py``, and ``make run`` serves it.
"""

import pytest
import torch
from transformers import AutoModelForCausalLM

from aes_ops import stack
from aes_lib.agents.trajectory import load_trajectory
from aes_lib.bus import Bus
from aes_lib.config import Settings
from aes_lib.runners.pool_store import BUCKET, PoolStore
from aes_ops.seeding import seed_pool
from aes_lib.flywheel.training import TrainingConfig
from aes_ops.waves import train
from aes_lib.learner import DppoTrainer, LearnerConfig, TokenizedTurn, load_tensors, policy_tensors
from aes_lib.learner import pack_turns
from aes_lib.models import ChatClient
from aes_lib.models.weights import TorchEngineClient
from aes_proto import subjects
from aes_proto.messages import LearnerStats, PolicyVersion, RolloutSummary, ServingUpdate
from aes_services.registry import SERVICES

from conftest import TASKS

pytestmark = [pytest.mark.docker, pytest.mark.model, pytest.mark.slow, pytest.mark.timeout(1500)]

LOOP = ("training-wave", "rollouts", "orchestrator", "learner", "weight-sync")
PROMPT = [{"role": "user", "content": "Name one shell command that lists files."}]


def _logprobs(model, chat) -> torch.Tensor:
    turn = TokenizedTurn(tuple(chat.prompt_token_ids), tuple(chat.completion_token_ids),
                         tuple(chat.completion_logprobs), chat.temperature)
    with torch.no_grad():
        return DppoTrainer(model, LearnerConfig())._token_logprobs(pack_turns([turn], 0.0))[0]


async def test_a_round_trains_and_the_engine_serves_the_new_weights(tiny_model, tmp_path, monkeypatch):
    for key, value in {"AES_LEARNER_MODEL_PATH": str(tiny_model), "AES_LEARNER_GROUPS_PER_BATCH": "1",
                       "AES_LEARNER_LR": "1e-3", "AES_TRAINING_MAX_TURNS": "1", "AES_TRAINING_MAX_TOKENS": "24",
                       "AES_HOME": str(tmp_path / "home")}.items():
        monkeypatch.setenv(key, value)  # the stack's processes inherit them
    settings = stack.up(Settings.from_env(home=tmp_path / "home"), services={n: SERVICES[n] for n in LOOP})
    try:
        waves = TrainingConfig(groups_per_wave=1, group_size=4, waves_per_round=2, max_turns=1, max_tokens=24)
        engine = TorchEngineClient(settings.model_url)
        async with await Bus.connect(settings, name="test") as bus:
            await seed_pool(bus, PoolStore(await bus.kv(BUCKET)), [TASKS / "coin"])
            tally = await train(bus, waves, round_=1, prefix="e2e", served_version=engine.version)
            stats = await bus.history(subjects.LEARNER_STATS, LearnerStats)
            versions = await bus.history(subjects.POLICY_VERSION, PolicyVersion)
            served = await bus.history(subjects.SERVING_VERSION, ServingUpdate)
            second = [r for r in await bus.history(subjects.ROLLOUT_SUMMARY, RolloutSummary) if r.episode_id == "e2ew1"]
            turns = [t for r in second for t in load_trajectory(bus.blobs, r.trajectory).turns]
            client = ChatClient(settings.model_url, settings.model)
            chat = await client.chat(PROMPT, max_tokens=16, temperature=1.0, seed=11)
            await client.aclose()
            latest = max(versions, key=lambda v: v.version)
            model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
            base = _logprobs(model, chat)
            load_tensors(model, policy_tensors(bus.blobs, latest.checkpoint))
            trained = _logprobs(model, chat)
    finally:
        stack.down(settings.home)

    assert stats and tally.updates == len(stats) >= 1
    assert max(u.version for u in served) == latest.version == chat.policy_version >= 1
    # Every turn of the second wave was sampled from a version the first wave's update produced.
    assert len(second) == 4 and turns and all(t.policy_version >= 1 for t in turns)
    assert all(r.policy_version >= 1 for r in second)
    served_logprobs = torch.tensor(chat.completion_logprobs)
    print(f"\nupdates {len(stats)}; served v{latest.version}; |served - trainer(new)| max "
          f"{(trained - served_logprobs).abs().max():.2e}; |trainer(base) - trainer(new)| max "
          f"{(base - trained).abs().max():.2e}")
    assert torch.allclose(trained, served_logprobs, atol=1e-3)
    assert (base - served_logprobs).abs().max() > 1e-3
