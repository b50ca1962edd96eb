"""Pool, planner, policy-watch and wave-planner services on a real nats-server."""

import asyncio
from collections import Counter

from aes_proto import subjects
from aes_proto.messages import (Assignment, BlobRef, CalibrationResult, Lineage, PolicyVersion, PoolEvent, PoolPlan,
                                PoolReview, RolloutRequest, RolloutSummary, TrainingWave)

from aes_lib.flywheel.config import FlywheelConfig
from aes_proto.records import HISTORY_BUCKET, PoolEntry
from aes_lib.runners.pool_store import BUCKET, PoolStore
from aes_services.planner import PlannerService, RolloutStatsService, load_histories
from aes_services.pool import PolicyWatchService, PoolService
from aes_services.training import WavePlannerService

from flywheel_helpers import drain_workqueue, idle, running, wait_for

CFG = FlywheelConfig(pool_capacity=8, review_every=4, proposals_per_assignment=1)


def _ref(env_id):
    return BlobRef(key=f"bundles/{env_id}.tar.gz", sha256=env_id, size=1)


def _result(env_id, assignment_id, decision="admitted", key=None):
    return CalibrationResult(
        idempotency_key=key or f"{assignment_id}:calibrate", episode_id=assignment_id, env_id=env_id,
        lineage=Lineage(assignment_id=assignment_id, round=1, category="text"), decision=decision,
        rewards=(1.0, 0.0, 1.0, 0.0), mean=0.5, std=0.5,
        proposer_reward=1.0 if decision == "admitted" else 0.25, bundle=_ref(env_id),
    )


async def test_pool_admits_each_environment_once_across_replicas(fresh_nats, bus):
    # Two replicas of the pool service; the same admission arrives twice (a republish after a
    # crash, new key), plus one from another assignment with an identical bundle, plus a rejection.
    async with running(fresh_nats, PoolService(CFG), PoolService(CFG)):
        await bus.publish(subjects.RESULT_CALIBRATION, _result("e1", "r1-000"))
        await bus.publish(subjects.RESULT_CALIBRATION, _result("e1", "r1-000", key="r1-000:calibrate:again"))
        await bus.publish(subjects.RESULT_CALIBRATION, _result("e1", "r1-001"))
        await bus.publish(subjects.RESULT_CALIBRATION, _result("e2", "r1-002", decision="too_hard"))
        await bus.publish(subjects.RESULT_CALIBRATION, _result("e3", "r1-003"))
        await wait_for(bus, subjects.POOL_EVENT, PoolEvent, lambda m: len(m) >= 3)
        await idle(bus, PoolService)
    events = await bus.history(subjects.POOL_EVENT, PoolEvent)
    idx = await PoolStore(await bus.kv(BUCKET)).index()
    assert sorted(idx.active) == ["e1", "e3"]
    admitted = [e.env_id for e in events if e.kind == "admitted"]
    assert sorted(admitted) == ["e1", "e3"]  # the republish of r1-000 repeats the same key: dropped
    assert [e.env_id for e in events if e.kind == "duplicate"] == ["e1"]
    entry = await PoolStore(await bus.kv(BUCKET)).entry("e1")
    assert entry.round == 1 and entry.assignment_id == "r1-000" and entry.category == "text"


async def test_policy_watch_requests_a_review_every_k_solver_updates(fresh_nats, bus):
    async with running(fresh_nats, PolicyWatchService(CFG)):
        solver_updates = 0
        for v in range(1, 13):  # the shared policy: every third update trains the proposer
            role = "proposer" if v % 3 == 0 else "solver"
            solver_updates += role == "solver"
            await bus.publish(subjects.POLICY_VERSION, PolicyVersion(
                idempotency_key=f"v{v}", episode_id="learn", version=v, checkpoint=_ref(f"ck{v}"),
                solver_updates=solver_updates, trained_role=role))
        reviews = await wait_for(bus, subjects.POOL_REVIEW, PoolReview, lambda m: len(m) >= 2)
        await asyncio.sleep(0.5)  # a review for proposer update v6 (also at 4 solver updates) would show now
        reviews = await bus.history(subjects.POOL_REVIEW, PoolReview)
    # The 4th and 8th solver updates are versions 5 and 11.
    assert [r.policy_version for r in reviews] == [5, 11]


async def test_stats_and_planner_publish_assignments_from_latest_rollouts(fresh_nats, bus):
    store = PoolStore(await bus.kv(BUCKET), capacity=8)
    for env_id, cat in (("hard", "text"), ("easy", "git"), ("gone", "text")):
        await store.admit(PoolEntry(env_id=env_id, bundle=_ref(env_id), category=cat))
    await store.retire(["gone"])
    rollouts = [("hard", 0.0, "test_sum: assert 3 == 4"), ("hard", 0.5, "test_sum: assert 3 == 4"),
                ("easy", 1.0, ""), ("easy", 1.0, ""), ("gone", 1.0, "")]
    async with running(fresh_nats, RolloutStatsService(), RolloutStatsService(), PlannerService(CFG)):
        for i, (env, reward, failure) in enumerate(rollouts):
            s = RolloutSummary(idempotency_key=f"ro{i}", episode_id="ep", rollout_id=f"ro{i}", env_id=env,
                               role="solver", reward=reward, failure=failure, purpose="pool_review")
            await bus.publish(subjects.ROLLOUT_SUMMARY, s)
        # a diagnostic attempt saw the reference solution: it must not count
        await bus.publish(subjects.ROLLOUT_SUMMARY, RolloutSummary(
            idempotency_key="diag", episode_id="ep", rollout_id="diag", env_id="hard", role="solver",
            reward=1.0, purpose="diagnostic"))
        kv = await bus.kv(HISTORY_BUCKET)
        while sum(len(h.recent) for h in (await load_histories(kv, ["hard", "easy", "gone"])).values()) < 6:
            await asyncio.sleep(0.1)
        await bus.publish(subjects.POOL_PLAN, PoolPlan(
            idempotency_key="round-1:plan", episode_id="round-1", round=1, fresh=2, retired=("gone",)))
        assignments = await drain_workqueue(bus, subjects.ASSIGNMENT, Assignment, 3)
    by_id = {a.lineage.assignment_id: a for a in assignments}
    assert set(by_id) == {"r1-replace-gone", "r1-000", "r1-001"}
    assert all(a.lineage.round == 1 and a.lineage.revision == 0 for a in assignments)
    assert by_id["r1-replace-gone"].direction == "harder" and by_id["r1-replace-gone"].lineage.parent_env_id == "gone"
    fresh = {a.lineage.parent_env_id: a for a in assignments if "replace" not in a.lineage.assignment_id}
    assert set(fresh) == {"hard", "easy"}  # one per category
    assert fresh["hard"].direction == "easier" and fresh["hard"].pass_rate == 0.25
    assert fresh["hard"].common_failure == "test_sum: assert 3 == 4"
    assert fresh["easy"].direction == "harder" and fresh["easy"].lineage.category == "git"


async def test_the_wave_planner_draws_what_taught_nothing_less(fresh_nats, bus, monkeypatch):
    """``AES_TRAINING_BUFFER_WEIGHT`` (the pools experiment's ``weighted`` arm): the wave planner
    weighs each pool environment by the spread of its latest training group, as the planner-stats
    service recorded it; uniformly the two would get about 20 of the 40 attempts each."""
    monkeypatch.setenv("AES_TRAINING_BUFFER_WEIGHT", "0.01")
    store = PoolStore(await bus.kv(BUCKET), capacity=8)
    for env_id in ("flat", "spread"):
        await store.admit(PoolEntry(env_id=env_id, bundle=_ref(env_id)))
    async with running(fresh_nats, RolloutStatsService(), WavePlannerService()):
        for env_id, rewards in (("flat", (1.0, 1.0)), ("spread", (1.0, 0.0))):
            for k, reward in enumerate(rewards):
                rid = f"w0-g0-{env_id}-{k}"
                await bus.publish(subjects.ROLLOUT_SUMMARY, RolloutSummary(
                    idempotency_key=rid, episode_id="w0", rollout_id=rid, env_id=env_id, role="solver", reward=reward))
        kv = await bus.kv(HISTORY_BUCKET)
        while sum(len(h.recent) for h in (await load_histories(kv, ["flat", "spread"])).values()) < 4:
            await asyncio.sleep(0.1)
        for w in range(1, 21):
            await bus.publish(subjects.TRAINING_WAVE, TrainingWave(
                idempotency_key=f"w{w}", episode_id=f"w{w}", wave_id=f"w{w}", groups=1, group_size=2))
        requests = await drain_workqueue(bus, subjects.ROLLOUT_REQUEST, RolloutRequest, 40)
    counts = Counter(r.env_id for r in requests)
    assert counts["spread"] >= 36 and counts["flat"] <= 4
