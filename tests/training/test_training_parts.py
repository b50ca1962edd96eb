"""The training loop's pure parts: wave sampling, configuration, which services and engines."""

import collections
import dataclasses

import pytest

from aes_lib.config import Settings
from aes_proto.records import EnvHistory, PoolEntry, RolloutRecord
from aes_lib.flywheel.training import (TrainingConfig, TrainingConfigError, buffer_weights, last_group,
                                       sample_environments, wave_requests)
from aes_ops.waves import LearnerTally
from aes_lib.models.weights import StaticEngineError, TorchEngineClient, VLLMEngineClient, engine_client
from aes_proto.messages import UNKNOWN_VERSION
from aes_proto.messages import BlobRef, LearnerStats, ServingUpdate, TrainingWave, TrajectoryRef
from aes_proto.trajectory import Trajectory, Turn
from aes_services.registry import OPTIONAL_GATES, SERVICES, stack_services
from aes_services.serving import engine_urls

REF = BlobRef(key="k", sha256="0" * 64, size=1)


def _entries(n):
    return [PoolEntry(env_id=f"env{i:02d}", bundle=REF) for i in range(n)]


def test_waves_sample_without_replacement_repeatably_and_cycle_a_small_pool():
    a = sample_environments(_entries(10), 4, "r1w0")
    assert len({e.env_id for e in a}) == 4 and a == sample_environments(_entries(10)[::-1], 4, "r1w0")
    assert a != sample_environments(_entries(10), 4, "r1w1")
    assert sorted(e.env_id for e in sample_environments(_entries(2), 4, "x")) == ["env00", "env00", "env01", "env01"]
    assert sample_environments([], 3, "x") == []


def _trained(env_id, *groups, purpose="training"):
    """``env_id``'s history with one group of attempts per ``groups`` entry, ids as ``wave_requests`` makes them."""
    return EnvHistory(env_id=env_id, recent=tuple(
        RolloutRecord(rollout_id=f"w{w}-g0-{env_id}-{k}", reward=r, purpose=purpose)
        for w, rewards in enumerate(groups) for k, r in enumerate(rewards)))


def test_the_last_training_group_is_read_from_the_rollout_ids():
    assert last_group(_trained("e", [0.0, 1.0], [1.0, 1.0, 1.0])) == [1.0, 1.0, 1.0]
    assert last_group(_trained("e", [0.0, 1.0], purpose="pool_review")) == []  # not a training group
    assert last_group(EnvHistory(env_id="e")) == []


def test_buffer_weights_weigh_down_what_had_no_spread_last_time():
    """Prime-rl's buffer: all-pass and all-fail groups teach nothing, so those environments are drawn
    less; a spread in the latest group restores the weight, as does never having been trained on."""
    histories = {"mastered": _trained("mastered", [1.0, 1.0]), "hopeless": _trained("hopeless", [0.0, 0.0]),
                 "frontier": _trained("frontier", [1.0, 0.0]), "recovered": _trained("recovered", [0.0, 0.0], [0.0, 1.0]),
                 "untried": EnvHistory(env_id="untried")}
    assert buffer_weights(histories, 0.1) == {"mastered": 0.1, "hopeless": 0.1}


def test_weighted_waves_draw_the_weighted_down_environments_less():
    entries = _entries(4)
    weights = {"env00": 0.1, "env01": 0.1}
    counts = collections.Counter(e.env_id for w in range(400)
                                 for e in sample_environments(entries, 2, f"w{w}", weights))
    # the two at weight 0.1 get about an eighth of the picks (half of them when uniform)
    assert counts["env00"] + counts["env01"] < 0.2 * (counts["env02"] + counts["env03"])
    assert sample_environments(entries, 4, "w0", weights) == sample_environments(entries[::-1], 4, "w0", weights)
    assert len({e.env_id for e in sample_environments(entries, 4, "w0", weights)}) == 4  # still without replacement
    # no weights: the uniform draw as before
    assert sample_environments(entries, 2, "w0", None) == sample_environments(entries, 2, "w0")


def test_wave_requests_are_groups_with_stable_ids():
    wave = TrainingWave(idempotency_key="r2w0", episode_id="r2w0", wave_id="r2w0", groups=2, group_size=3,
                        policy_version=5)
    reqs = wave_requests(wave, _entries(5))
    assert len(reqs) == 6 and len({r.rollout_id for r in reqs}) == 6
    assert {(r.group_size, r.policy_version, r.wave_id) for r in reqs} == {(3, 5, "r2w0")}
    assert len({r.group_id for r in reqs}) == 2
    assert [r.idempotency_key for r in reqs] == [r.idempotency_key for r in wave_requests(wave, _entries(5))]


def test_only_a_pool_seeds_attempts_run_as_imported():
    wave = TrainingWave(idempotency_key="w", episode_id="w", wave_id="w", groups=2, group_size=2)
    entries = [PoolEntry(env_id="seed", bundle=REF, source="seed"), PoolEntry(env_id="gen", bundle=REF)]
    assert {(r.env_id, r.imported) for r in wave_requests(wave, entries)} == {("seed", True), ("gen", False)}


def test_forgeable_entries_are_left_out_unless_allowed():
    wave = TrainingWave(idempotency_key="w", episode_id="w", wave_id="w", groups=4, group_size=2)
    entries = [PoolEntry(env_id="safe", bundle=REF), PoolEntry(env_id="forge", bundle=REF, forgeable="probe 3")]
    assert {r.env_id for r in wave_requests(wave, entries)} == {"safe"}
    assert {r.env_id for r in wave_requests(wave, entries, allow_forgeable=True)} == {"safe", "forge"}


def test_training_config_refuses_what_cannot_train(monkeypatch):
    with pytest.raises(TrainingConfigError, match="one attempt has no advantage"):
        TrainingConfig(group_size=1)
    with pytest.raises(TrainingConfigError, match="temperature"):
        TrainingConfig(temperature=0)
    for weight in (0.0, 1.5):
        with pytest.raises(TrainingConfigError, match="buffer_weight"):
            TrainingConfig(buffer_weight=weight)
    monkeypatch.setenv("AES_TRAINING_GROUP_SIZE", "6")
    assert TrainingConfig.from_env().group_size == 6


def test_the_stack_starts_training_only_with_an_engine_that_follows_weights():
    shared = stack_services("torch", "shared")
    assert {"orchestrator", "learner", "rollouts", "weight-sync", "proposer-samples"} <= set(shared)
    assert not {"orchestrator-solver", "learner-solver", "orchestrator-proposer", "learner-proposer"} & set(shared)
    separate = stack_services("torch", "separate")
    assert {"orchestrator-solver", "learner-solver", "orchestrator-proposer", "learner-proposer"} <= set(separate)
    assert not {"orchestrator", "learner"} & set(separate)
    static = stack_services("gguf", "shared")
    assert "validator" in static and not {"orchestrator", "learner", "rollouts", "weight-sync",
                                          "training-wave"} & set(static)
    assert set(shared) | set(separate) | set(OPTIONAL_GATES) == set(SERVICES)  # optional gates: when routed
    assert set(stack_services("vllm", "shared")) == set(shared)  # vLLM follows the learner too
    with pytest.raises(ValueError, match="AES_POLICY_MODE"):
        stack_services("torch", "both")


def test_each_policy_reaches_the_engines_that_serve_it():
    one = Settings(model_url="http://a/v1")
    assert engine_urls(one, "shared") == ["http://a/v1"]
    two = dataclasses.replace(one, proposer_model_url="http://b/v1")
    assert engine_urls(two, "shared") == ["http://a/v1", "http://b/v1"]
    assert engine_urls(two, "solver") == ["http://a/v1"] and engine_urls(two, "proposer") == ["http://b/v1"]
    assert isinstance(engine_client("torch", "http://a/v1"), TorchEngineClient)
    assert isinstance(engine_client("vllm", "http://a/v1"), VLLMEngineClient)
    with pytest.raises(StaticEngineError, match="cannot load"):
        engine_client("gguf", "http://a/v1")


def test_the_round_line_reports_version_updates_rewards_per_role_and_mask():
    t = LearnerTally()
    for role, reward in (("solver", 1.0), ("solver", 0.0), ("proposer", 0.5)):
        t.observe(TrajectoryRef(idempotency_key=f"{role}{reward}", episode_id="e", rollout_id="r", env_id="x",
                                role=role, group_id="g", reward=reward, trajectory=REF))
    t.observe(LearnerStats(idempotency_key="s", episode_id="e", step=3, policy_version=3, loss=0.1, mean_reward=0.5,
                           mask_fraction=0.1, mean_divergence=0.0, tokens=200, masked_tokens=10))
    t.observe(ServingUpdate(idempotency_key="u", episode_id="e", policy="shared", version=3, engine="u", seconds=1.0))
    assert t.line() == ("learner: policy v3 (served v3), 1 updates; mean training reward per role: "
                        "proposer 0.500 (n=1), solver 0.500 (n=2); masked tokens 5.0%")
    t.reset()
    assert t.updates == 0 and t.samples == {}


def test_a_trajectory_with_a_turn_of_unknown_version_is_unknown_never_v0():
    """An engine that does not say which weights sampled a turn leaves the sample's age unknown:
    the learner must not take it for the base weights (it drops it instead)."""
    def traj(*versions):
        return Trajectory(rollout_id="r", role="solver",
                          turns=[Turn(index=i, reply="", policy_version=v) for i, v in enumerate(versions)])

    assert traj(3, 2).policy_version == 2
    assert traj(3, None).policy_version == traj(None).policy_version == UNKNOWN_VERSION == -1
    with pytest.raises(TrainingConfigError, match="policy_lag"):
        TrainingConfig(policy_lag=-1)


def test_each_pools_arm_runs_the_services_that_make_it():
    """``aes experiment pools``: the controls change settings, not services, except that the
    weighted arm's buffer weights read the planner-stats histories."""
    from aes_lib.flywheel.experiment import ARMS
    from aes_lib.learner import LearnerConfig
    from aes_ops.experiment import _services

    names = {arm: {s.name for s in _services(arm, TrainingConfig(), LearnerConfig())} for arm in ARMS}
    assert names["weighted"] - names["static"] == {"planner-stats"} and names["oracle"] == names["static"]
    assert names["blind"] == names["flywheel"] and {"planner", "calibrator"} <= names["blind"]
