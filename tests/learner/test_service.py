"""The orchestrator and the learner (trainer) on a real NATS JetStream bus and a real blob store."""

import asyncio
import contextlib

import msgspec
import pytest
import torch

from aes_lib.agents.trajectory import store_trajectory
from aes_lib.bus import Bus, serve
from aes_lib.learner import LearnerConfig, LearnerConfigError, policy_tensors
from aes_lib.models.engine import TorchEngine
from aes_proto import subjects
from aes_proto.messages import LearnerStats, PolicyVersion, TrainBatch, TrajectoryRef
from aes_proto.trajectory import Trajectory, Turn
from aes_services.learner import BatchOrderError, LearnerService
from aes_services.orchestrator import OrchestratorService

from .helpers import BOS, EOS, SEP, tiny_llama

pytestmark = pytest.mark.timeout(120)


@contextlib.asynccontextmanager
async def serving(settings, *services):
    stop = asyncio.Event()
    buses = [await Bus.connect(settings, name=s.name) for s in services]
    tasks = [asyncio.create_task(serve(s, b, stop)) for s, b in zip(services, buses)]
    try:
        yield
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        for b in buses:
            await b.close()


async def until(bus, subject, type_, n):
    while len(msgs := await bus.history(subject, type_, timeout=0.2)) < n:
        await asyncio.sleep(0.2)
    return msgs


async def publish_group(bus, group, digit, answers, rewards, screened=()):
    """``screened``: the members whose trials showed forgery signs."""
    for i, (answer, reward) in enumerate(zip(answers, rewards)):
        rid = f"{group}-{i}"
        turn = Turn(index=0, reply=str(answer), prompt_token_ids=[BOS, digit, SEP],
                    completion_token_ids=[answer, EOS], completion_logprobs=[-2.7, -2.7])
        ref = store_trajectory(bus.blobs, Trajectory(rollout_id=rid, role="solver", env_id=group, turns=[turn]))
        await bus.publish(subjects.trajectory("solver"), TrajectoryRef(
            idempotency_key=rid, episode_id="ep", rollout_id=rid, env_id=group, role="solver",
            group_id=group, reward=reward, trajectory=ref, n_tokens=2,
            screened="setuid file: /app/t" if i in screened else ""))


@pytest.mark.parametrize("every", [1, 8], ids=["saved", "replayed"])
async def test_service_trains_publishes_and_resumes(fresh_nats, tmp_path, every):
    """Resuming rebuilds the announced weights either from the training-state save (every update)
    or by replaying the logged update on the base weights (no save yet)."""
    initial = tiny_llama(seed=0)
    initial.save_pretrained(tmp_path / "model")
    config = LearnerConfig(model_path=str(tmp_path / "model"), solver_group_size=4, groups_per_batch=2, lr=1e-2,
                           checkpoint_every=every)
    service = LearnerService(config, run_id="run1")
    orchestrator = OrchestratorService(config)
    async with await Bus.connect(fresh_nats) as bus:
        await publish_group(bus, "env-a", 3, [4, 1, 2, 5], [1, 0, 0, 0])
        await publish_group(bus, "env-b", 6, [0, 1, 2, 3], [0, 0, 0, 0])  # no signal: dropped
        await publish_group(bus, "env-d", 1, [2, 3], [1, 0])  # incomplete: carried over
        await publish_group(bus, "env-c", 8, [9, 9, 0, 1], [1, 1, 0, 0], screened=(3,))  # trained on 3
        async with serving(fresh_nats, orchestrator, service):
            (pv,) = await until(bus, subjects.POLICY_VERSION, PolicyVersion, 1)
            (stats,) = await until(bus, subjects.LEARNER_STATS, LearnerStats, 1)
        (batch,) = await until(bus, subjects.train_batch("shared"), TrainBatch, 1)
        assert batch.batch_id == 1 and batch.group_ids == ("env-a", "env-c") and batch.n_tokens == 14
        assert orchestrator.held.keys() == {"env-d-0", "env-d-1"}  # only the incomplete group's refs stay

        assert pv.version == stats.policy_version == 1 and pv.base_model == "model"
        assert pv.checkpoint.key == "checkpoints/policy/v000001/manifest.json"
        assert (stats.groups_used, stats.groups_dropped, stats.carried_over) == (2, 1, 2)
        assert stats.tokens == 14 and stats.role == "solver" and batch.screened == stats.screened == 1
        assert stats.mean_reward == pytest.approx(3 / 7)
        assert stats.masked_tokens >= 0 and 0.0 <= stats.mask_fraction <= 1.0 and stats.mean_divergence > 0

        # The rollout side follows the announced version: its weights become the learner's.
        rollout = TorchEngine(tiny_llama(seed=0))
        assert rollout.load_state_dict(policy_tensors(bus.blobs, pv.checkpoint), pv.version)
        assert rollout.version == 1
        assert not rollout.load_state_dict(policy_tensors(bus.blobs, pv.checkpoint), pv.version)  # not newer
        rollout.close()
        trained = service.trainer.model.state_dict()
        for k, v in rollout.model.state_dict().items():
            assert torch.equal(v, trained[k]), k
        assert any(not torch.equal(v, initial.state_dict()[k]) for k, v in trained.items())

        # A restarted learner resumes at the latest version with its weights.
        restarted = LearnerService(config, run_id="run1")
        await restarted.setup(bus)
        assert restarted.version == 1
        assert (restarted.state.train_version, len(restarted.state.replay)) == ((1, 0) if every == 1 else (0, 1))
        for k, v in restarted.trainer.model.state_dict().items():
            assert torch.equal(v, trained[k]), k
        # ...and its AdamW moments: the next update is the one the first learner would have made.
        assert len(restarted.trainer.optimizer.state) == len(service.trainer.optimizer.state) > 0
        for a, b in zip(service.trainer.optimizer.state.values(), restarted.trainer.optimizer.state.values()):
            assert torch.equal(a["exp_avg"], b["exp_avg"]) and torch.equal(a["exp_avg_sq"], b["exp_avg_sq"])

        # Exactly once by batch id: the trained batch, redelivered, is acked untrained; a batch
        # ahead of the next one is refused (redelivered until its predecessor trained).
        await restarted.handle(batch, bus)
        assert restarted.version == 1 and restarted.trainer.steps == (0 if every == 1 else 1)
        ahead = msgspec.structs.replace(batch, batch_id=3, idempotency_key="run1:batch:3")
        with pytest.raises(BatchOrderError, match="batch 3 arrived before batch 2"):
            await restarted.handle(ahead, bus)
        for k, v in restarted.trainer.model.state_dict().items():
            assert torch.equal(v, trained[k]), k

        # A restarted orchestrator holds the incomplete group again and continues after batch 1.
        again = OrchestratorService(config)
        await again.setup(bus)
        assert again.batch_id == 1 and again.held.keys() == {"env-d-0", "env-d-1"}
        assert again.batcher.pending == 2


async def test_setup_rejects_missing_model(fresh_nats, tmp_path):
    async with await Bus.connect(fresh_nats) as bus:
        with pytest.raises(LearnerConfigError, match="AES_LEARNER_MODEL_PATH"):
            await LearnerService(LearnerConfig(model_path=str(tmp_path)), run_id="x").setup(bus)


async def test_with_the_filesystem_transport_the_version_is_one_folder_outside_the_store(fresh_nats, tmp_path):
    """``AES_WEIGHT_TRANSPORT=filesystem``: the learner's export is the version, written once
    under ``AES_WEIGHTS_DIR`` and announced by its path; the store holds no copy of it."""
    import dataclasses

    from aes_lib.learner import checkpoint_key
    from aes_lib.learner.checkpoint import folder_tensors

    tiny_llama(seed=0).save_pretrained(tmp_path / "model")
    config = LearnerConfig(model_path=str(tmp_path / "model"), solver_group_size=4, groups_per_batch=1, lr=1e-2)
    settings = dataclasses.replace(fresh_nats, weight_transport="filesystem", weights_dir=str(tmp_path / "shared"))
    service = LearnerService(config, run_id="run1")
    async with await Bus.connect(settings) as bus:
        await publish_group(bus, "env-a", 3, [4, 1, 2, 5], [1, 0, 0, 0])
        async with serving(settings, OrchestratorService(config), service):
            (pv,) = await until(bus, subjects.POLICY_VERSION, PolicyVersion, 1)
        folder = tmp_path / "shared" / "checkpoints" / "policy" / "v000001"
        assert (pv.version, pv.folder, pv.checkpoint) == (1, str(folder), None)
        assert not bus.blobs.exists(checkpoint_key("checkpoints/policy", 1))
        assert [p.name for p in folder.parent.iterdir()] == ["v000001"]
        rollout = TorchEngine(tiny_llama(seed=0))
        assert rollout.load_state_dict(folder_tensors(folder), pv.version)
        rollout.close()
        trained = service.trainer.model.state_dict()
        for k, v in rollout.model.state_dict().items():
            assert torch.equal(v, trained[k]), k
