"""A finished attempt is reused on redelivery (real JetStream KV bucket); a record stored before
outcomes carried their summary (no rollout id to publish under) is run again instead."""

from __future__ import annotations

import asyncio

import msgspec

from aes_lib.runners.rollouts import cached, kv_key
from aes_proto.messages import BlobRef
from aes_proto.records import TRAINING_BUCKET, RolloutOutcome

REF = BlobRef(key="trajectories/solver/r1.json", sha256="ab" * 32, size=3)


async def test_a_finished_attempt_is_reused_and_an_old_record_runs_again(bus) -> None:
    kv = await bus.kv(TRAINING_BUCKET)
    runs: list[str] = []

    async def run() -> RolloutOutcome:
        runs.append("r1")
        return RolloutOutcome(reward=1.0, trajectory=REF, rollout_id="r1", env_id="e", policy_version=2)

    await kv.put(kv_key("r1"), msgspec.msgpack.encode({"reward": 0.0, "trajectory": msgspec.to_builtins(REF)}))
    first = await cached(kv, "r1", run)
    again = await cached(kv, "r1", run)
    assert runs == ["r1"] and first == again
    assert (again.rollout_id, again.reward, again.policy_version) == ("r1", 1.0, 2)


async def test_two_deliveries_running_at_once_return_the_first_recorded_attempt(bus, tmp_path) -> None:
    """A redelivery while the first delivery still runs (a starved replica missed its heartbeats):
    both run, and both return, hence publish, the outcome recorded first; each trajectory blob
    has a key of its own, so the one the published messages name is never overwritten."""
    from aes_lib.agents.trajectory import load_trajectory, store_trajectory
    from aes_lib.blobstore import open_store
    from aes_proto.trajectory import Trajectory

    kv = await bus.kv(TRAINING_BUCKET)
    store = open_store(f"file://{tmp_path / 'blobs'}")
    second_may_finish = asyncio.Event()

    def attempt(reward: float) -> RolloutOutcome:
        traj = Trajectory(rollout_id="r2", role="solver", metrics={"reward": reward})
        return RolloutOutcome(reward=reward, trajectory=store_trajectory(store, traj), rollout_id="r2", env_id="e")

    async def first() -> RolloutOutcome:
        return attempt(1.0)

    async def second() -> RolloutOutcome:
        await second_may_finish.wait()
        return attempt(0.0)

    slow = asyncio.create_task(cached(kv, "r2", second))
    await asyncio.sleep(0.1)  # the second delivery is past its cache check, still running
    fast = await cached(kv, "r2", first)
    second_may_finish.set()
    late = await slow
    assert fast == late and late.reward == 1.0
    assert load_trajectory(store, late.trajectory).metrics == {"reward": 1.0}  # intact, not overwritten
