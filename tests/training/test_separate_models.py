"""Separate models: a learner and an engine per role, each following only its own policy.

Two engines (solver, proposer) serve the tiny model; the solver learner consumes
only solver trajectories and the proposer learner only proposer ones; the weight
sync loads each policy's versions into its own engine and never into the other.
"""

import dataclasses

import pytest

from aes_lib.agents.trajectory import store_trajectory
from aes_lib.learner import LearnerConfig
from aes_lib.models.torch_serve import serve
from aes_lib.models.weights import TorchEngineClient
from aes_proto import subjects
from aes_proto.messages import LearnerStats, PolicyVersion, ServingUpdate, TrajectoryRef
from aes_proto.trajectory import Trajectory, Turn
from aes_services.learner import ProposerLearnerService, SolverLearnerService
from aes_services.orchestrator import ProposerOrchestratorService, SolverOrchestratorService
from aes_services.serving import WeightSyncService

from flywheel_helpers import running, wait_for

pytestmark = pytest.mark.timeout(240)


async def _group(bus, role: str, group: str, rewards: list[float]) -> None:
    for i, reward in enumerate(rewards):
        rid = f"{group}-{i}"
        turn = Turn(index=0, reply="x", prompt_token_ids=[1, 2, 3], completion_token_ids=[5 + i, 2],
                    completion_logprobs=[-1.0, -0.5])
        ref = store_trajectory(bus.blobs, Trajectory(rollout_id=rid, role=role, turns=[turn]))
        await bus.publish(subjects.trajectory(role), TrajectoryRef(
            idempotency_key=rid, episode_id=group, rollout_id=rid, env_id="e", role=role, group_id=group,
            group_size=len(rewards), reward=reward, trajectory=ref))


async def test_each_role_trains_its_own_policy_and_engine(fresh_nats, bus, tiny_model, monkeypatch):
    monkeypatch.setenv("AES_HOME", str(fresh_nats.home))
    monkeypatch.setenv("AES_BLOB_URL", fresh_nats.blob_location)
    (solver_srv, solver_url), (proposer_srv, proposer_url) = serve(tiny_model), serve(tiny_model)
    settings = dataclasses.replace(fresh_nats, model_url=solver_url, proposer_model_url=proposer_url,
                                   engine="torch", policy_mode="separate")
    config = LearnerConfig(model_path=str(tiny_model), groups_per_batch=1, proposer_groups_per_batch=1, lr=1e-3)
    try:
        async with running(settings, SolverOrchestratorService(config), SolverLearnerService(config),
                           ProposerOrchestratorService(config), ProposerLearnerService(config), WeightSyncService()):
            await _group(bus, "solver", "s1", [1.0, 0.0])
            await _group(bus, "solver", "s2", [0.0, 1.0])
            await _group(bus, "proposer", "p1", [1.0, 0.5, 0.0])
            await wait_for(bus, subjects.SERVING_VERSION, ServingUpdate, lambda m: len(m) == 3)
            solver_version = await TorchEngineClient(solver_url).version()
            proposer_version = await TorchEngineClient(proposer_url).version()
    finally:
        solver_srv.shutdown()
        proposer_srv.shutdown()
    stats = await bus.history(subjects.LEARNER_STATS, LearnerStats)
    assert sorted((s.policy, s.role, s.group_ids) for s in stats) == [
        ("proposer", "proposer", ("p1",)), ("solver", "solver", ("s1",)), ("solver", "solver", ("s2",))]
    versions = await bus.history(subjects.POLICY_VERSION, PolicyVersion)
    assert sorted((v.policy, v.version, v.checkpoint.key.split("/")[1]) for v in versions) == [
        ("proposer", 1, "policy-proposer"), ("solver", 1, "policy-solver"), ("solver", 2, "policy-solver")]
    served = await bus.history(subjects.SERVING_VERSION, ServingUpdate)
    assert sorted((u.policy, u.version, u.engine) for u in served) == [
        ("proposer", 1, proposer_url), ("solver", 1, solver_url), ("solver", 2, solver_url)]
    assert (solver_version, proposer_version) == (2, 1)
