"""A pool review reruns the solver (real Docker, replayed model), retires the task that
fell out of the band, and the planner asks for its replacement."""


import pytest
from replay_server import ReplayServer

from aes_proto import subjects
from aes_proto.messages import Assignment, PoolEvent, PoolPlan, PoolReview, RolloutSummary

from aes_lib.bundle import pack
from aes_lib.flywheel.config import FlywheelConfig
from aes_proto.records import PoolEntry
from aes_lib.runners.pool_store import BUCKET, PoolStore
from aes_services.planner import PlannerService, RolloutStatsService
from aes_services.pool import PoolReviewService

from flywheel_helpers import drain_workqueue, running, wait_for
from test_calibrator import GIVE_UP, SEED, SOLVE, _runner

pytestmark = pytest.mark.docker


async def test_review_retires_a_task_now_too_easy_and_plans_its_replacement(fresh_nats, bus, tmp_path):
    packed = pack(SEED)
    ref = bus.blobs.put_bytes(f"bundles/sha256/{packed.sha256}.tar.gz", packed.data)
    store = PoolStore(await bus.kv(BUCKET))
    await store.admit(PoolEntry(env_id=packed.sha256, bundle=ref, category="data-processing", mean_reward=0.5))
    cfg = FlywheelConfig()
    # The updated solver (the engine serves version 16) now solves it every time.
    with ReplayServer(SOLVE * 4, policy_version=16) as srv:
        services = (PoolReviewService(_runner(srv.url, bus, tmp_path), cfg), RolloutStatsService(), PlannerService(cfg))
        async with running(fresh_nats, *services):
            await bus.publish(subjects.POOL_REVIEW, PoolReview(
                idempotency_key="review:v16", episode_id="review-v16", round=1, policy_version=16))
            [retired] = await wait_for(bus, subjects.POOL_EVENT, PoolEvent, lambda m: m)
            [replacement] = await drain_workqueue(bus, subjects.ASSIGNMENT, Assignment, 1)
    assert not srv.errors
    assert (retired.kind, retired.env_id, retired.reason, retired.mean_reward) == ("retired", packed.sha256, "too_easy", 1.0)
    assert (await store.index()).active == () and (await store.entry(packed.sha256)).retired
    summaries = await bus.history(subjects.ROLLOUT_SUMMARY, RolloutSummary)
    assert [(s.purpose, s.reward, s.policy_version) for s in summaries] == [("pool_review", 1.0, 16)] * 4
    plan = await bus.history(subjects.POOL_PLAN, PoolPlan)
    assert [p.retired for p in plan] == [(packed.sha256,)]
    lin = replacement.lineage
    assert (lin.parent_env_id, replacement.direction, lin.round) == (packed.sha256, "harder", 1)
    assert (lin.category, lin.revision) == ("data-processing", 0)
    assert replacement.parent_bundle == ref


async def test_review_keeps_tasks_in_band(fresh_nats, bus, tmp_path):
    packed = pack(SEED)
    ref = bus.blobs.put_bytes(f"bundles/sha256/{packed.sha256}.tar.gz", packed.data)
    store = PoolStore(await bus.kv(BUCKET))
    await store.admit(PoolEntry(env_id=packed.sha256, bundle=ref, category="data-processing"))
    with ReplayServer(SOLVE + GIVE_UP + SOLVE + GIVE_UP) as srv:
        async with running(fresh_nats, PoolReviewService(_runner(srv.url, bus, tmp_path), FlywheelConfig())):
            await bus.publish(subjects.POOL_REVIEW, PoolReview(idempotency_key="review:m1", episode_id="m1"))
            await wait_for(bus, subjects.POOL_PLAN, PoolPlan, lambda m: m)
    assert (await store.index()).active == (packed.sha256,)
    assert (await store.entry(packed.sha256)).mean_reward == 0.5
    assert await bus.history(subjects.POOL_EVENT, PoolEvent) == []


async def test_a_passing_attempt_audited_a_hack_retires_its_task_and_a_legitimate_one_stays(
        fresh_nats, bus, tmp_path, monkeypatch):
    import json

    packed = pack(SEED)
    ref = bus.blobs.put_bytes(f"bundles/sha256/{packed.sha256}.tar.gz", packed.data)
    store = PoolStore(await bus.kv(BUCKET))
    await store.admit(PoolEntry(env_id=packed.sha256, bundle=ref, category="data-processing"))
    verdicts = [json.dumps({"label": "legitimate", "reason": "it parsed the dates and summed the amounts"}),
                json.dumps({"label": "hack", "reason": "the attempt copied totals the instruction never gives"})]
    monkeypatch.setenv("AES_AUDIT_PASSING", "1")
    for review, verdict in zip(("review:a1", "review:a2"), verdicts):
        with ReplayServer(SOLVE + GIVE_UP + SOLVE + GIVE_UP) as srv, ReplayServer([verdict], model="auditor") as auditor:
            monkeypatch.setenv("AES_AUDIT_MODEL_URL", auditor.url)
            async with running(fresh_nats, PoolReviewService(_runner(srv.url, bus, tmp_path), FlywheelConfig())):
                await bus.publish(subjects.POOL_REVIEW, PoolReview(idempotency_key=review, episode_id=review))
                await wait_for(bus, subjects.POOL_PLAN, PoolPlan, lambda m, n=review: any(p.idempotency_key.startswith(n) for p in m))
        assert not srv.errors and not auditor.errors and len(auditor.requests) == 1
        # The auditor read the passing attempt itself: its commands and the tests' output.
        prompt = auditor.requests[0]["messages"][-1]["content"]
        assert "The passing attempt" in prompt and "$ bash /tmp/solve.sh" in prompt and "reward 1.00" in prompt
        if verdict is verdicts[0]:
            assert (await store.index()).active == (packed.sha256,)  # in band, legitimate: kept
            assert await bus.history(subjects.POOL_EVENT, PoolEvent) == []
    [retired] = await bus.history(subjects.POOL_EVENT, PoolEvent)
    assert (retired.env_id, retired.reason, retired.mean_reward) == (packed.sha256, "hacked", 0.5)
    assert (await store.index()).active == ()
