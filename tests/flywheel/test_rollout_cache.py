"""A finished attempt is reused on redelivery (real JetStream KV bucket); a record stored before
outcomes carried their summary (no rollout id to publish under) is run again instead."""

from __future__ import annotations

import msgspec

from aes_lib.flywheel.runners.rollouts import cached, kv_key
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
