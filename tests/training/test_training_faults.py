"""A training attempt that meets a sandbox fault is retried, never scored 0: the training-rollout
service (real nats-server, its real redelivery) gets a ``TrialFault`` from the attempt's first run
(injected: a Docker failure cannot be caused on cue; ``tests/sandbox/test_trial_faults.py`` shows
the real trial raising it), and the only summary published is the retried attempt's."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from aes_lib.agents.trajectory import store_trajectory
from aes_lib.sandbox import TrialFault
from aes_proto import subjects
from aes_proto.messages import BlobRef, RolloutRequest, RolloutSummary
from aes_proto.records import RolloutOutcome
from aes_proto.trajectory import Trajectory

from flywheel_helpers import running, training_rollouts, wait_for


class FlakyRunner:
    """The first run of each attempt fails in the sandbox; the next one scores 1."""

    def __init__(self, trajectory: BlobRef) -> None:
        self.trajectory = trajectory
        self.runs: Counter[str] = Counter()

    async def run(self, bundle, env_id, rollout_id, hints=None, imported=False) -> RolloutOutcome:
        self.runs[rollout_id] += 1
        if self.runs[rollout_id] == 1:
            raise TrialFault("sandbox failed: injected: the Docker daemon dropped the connection")
        return RolloutOutcome(reward=1.0, trajectory=self.trajectory, n_turns=1, rollout_id=rollout_id, env_id=env_id,
                              model="m", policy_version=0)


async def test_a_faulted_training_attempt_is_retried_not_scored(fresh_nats, bus) -> None:
    ref = await asyncio.to_thread(store_trajectory, bus.blobs, Trajectory(rollout_id="w-g0-0", role="solver",
                                                                          env_id="env", model="m", reward=1.0))
    runner = FlakyRunner(ref)
    req = RolloutRequest(idempotency_key="w-g0-0", episode_id="w", rollout_id="w-g0-0", env_id="env", bundle=ref,
                         group_id="w-g0", group_size=2, wave_id="w")
    async with running(fresh_nats, training_rollouts(runner)):
        await bus.publish(subjects.ROLLOUT_REQUEST, req)
        summaries = await asyncio.wait_for(
            wait_for(bus, subjects.ROLLOUT_SUMMARY, RolloutSummary, lambda ms: len(ms) >= 1), 60)
    assert runner.runs["w-g0-0"] == 2  # redelivered after the fault
    assert [(s.rollout_id, s.reward) for s in summaries] == [("w-g0-0", 1.0)]  # no 0 for the fault
