"""Overlapped waves: with ``policy_lag`` 1 the next wave samples while the learner trains on the
previous one, and no sample the learner trains on is more than one version old.

Real NATS, Docker rollouts of the ``coin`` task (random verifier: groups nearly always have a
spread, so the learner updates), the tiny model in the torch engine, the learner and weight sync,
all through the services. With ``policy_lag`` 0 (the synchronous loop) wave 1 would be requested
only after the update trained on wave 0 was published and served.
"""

import dataclasses

import pytest

from aes_lib.runners.pool_store import BUCKET, PoolStore
from aes_lib.flywheel.training import TrainingConfig
from aes_lib.learner import LearnerConfig
from aes_lib.models.torch_serve import serve
from aes_lib.models.weights import TorchEngineClient
from aes_ops.seeding import seed_pool
from aes_ops.waves import train
from aes_proto import subjects
from aes_proto.messages import LearnerStats, RolloutSummary, TrajectoryRef
from aes_services.learner import LearnerService
from aes_services.orchestrator import OrchestratorService
from aes_services.serving import WeightSyncService
from aes_services.training import TrainingRolloutService, WavePlannerService

from conftest import TASKS
from flywheel_helpers import running

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(900)]

WAVES = 3


@pytest.mark.parametrize("lag", [1, 0])
async def test_with_lag_one_the_next_wave_samples_while_the_learner_trains(fresh_nats, bus, tiny_model, monkeypatch,
                                                                           lag):
    """Lag 0 is the synchronous loop, run as the contrast: there wave 1 comes after wave 0's update."""
    monkeypatch.setenv("AES_HOME", str(fresh_nats.home))
    monkeypatch.setenv("AES_BLOB_URL", fresh_nats.blob_location)
    server, url = serve(tiny_model)
    settings = dataclasses.replace(fresh_nats, model_url=url, engine="torch")
    await seed_pool(bus, PoolStore(await bus.kv(BUCKET)), [TASKS / "coin"])
    # 8 attempts a group: all 8 coins alike (no spread, no update) has p < 0.01.
    waves = TrainingConfig(groups_per_wave=1, group_size=8, waves_per_round=WAVES, max_turns=1, max_tokens=16,
                           policy_lag=lag, engine_wait_s=600)
    learner = LearnerService(LearnerConfig(model_path=str(tiny_model), groups_per_batch=1, max_policy_lag=1))
    lines: list[str] = []
    try:
        async with running(settings, WavePlannerService(), TrainingRolloutService(config=waves), OrchestratorService(learner.config), learner,
                           WeightSyncService()):
            await train(bus, waves, round_=1, prefix="ov", served_version=TorchEngineClient(url).version,
                        out=lines.append)
    finally:
        server.shutdown()
    print("\n" + "\n".join(lines))

    summaries = [s for s in await bus.history(subjects.ROLLOUT_SUMMARY, RolloutSummary) if s.purpose == "training"]
    assert sorted(s.episode_id for s in summaries) == sorted(f"ovw{w}" for w in range(WAVES) for _ in range(8))
    stats = await bus.history(subjects.LEARNER_STATS, LearnerStats)
    refs = await bus.history(subjects.trajectory("solver"), TrajectoryRef)
    assert stats
    # Rollouts went on during an update: wave 1 was requested before the update that trained on
    # wave 0's group was reported (synchronously it would come after that update was served).
    first_update = next(i for i, line in enumerate(lines) if line.lstrip().startswith("update -> "))
    wave1 = next(i for i, line in enumerate(lines) if line.startswith("== training wave ovw1"))
    assert any(s.group_ids[0].startswith("ovw0") for s in stats)  # wave 0's group trained
    assert (wave1 < first_update) if lag else (first_update < wave1)
    # No trained sample is older than the lag: an update to v trains at v - 1 on samples >= v - 2.
    for s in stats:
        trained = [r.policy_version for r in refs if r.group_id in s.group_ids]
        assert trained and min(trained) >= s.policy_version - 1 - 1, (s.policy_version, trained)
