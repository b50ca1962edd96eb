"""Faults are not rewards: a Docker failure outside the agent's container ends the trial with a
``TrialFault`` (a transient fault: the bus redelivers the calibration or training attempt, then
dead-letters it) instead of a reward of 0. The fault is injected into the real trial path (the
engine itself cannot be made to fail on cue)."""

from __future__ import annotations

import pytest
from replay_server import ReplayServer

from aes_lib.agents.loop import LoopLimits
from aes_lib.agents.solver import rollout
from aes_lib.blobstore import open_store
from aes_lib.bundle import Task
from aes_lib.faults import classify
from aes_lib.flywheel.calibrate import calibrate
from aes_lib.flywheel.calibration import CalibrationRule
from aes_lib.flywheel.revision import RolloutEvidence
from aes_lib.models import ChatClient
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import ImageCache, OracleAgent, Sandbox, SandboxError, TrialFault, run_trial

pytestmark = pytest.mark.docker


@pytest.fixture
def verifier_read_fails(monkeypatch):
    """The daemon fails while the reward files are copied out of the verifier's container."""
    async def fail(self, remote_dir, max_bytes=0):
        raise SandboxError("injected: the Docker daemon dropped the connection")

    monkeypatch.setattr(Sandbox, "get_files", fail)


async def test_docker_fault_in_the_verifier_is_no_reward(make_task, images, test_label, verifier_read_fails) -> None:
    with pytest.raises(TrialFault, match="injected") as e:
        await run_trial(Task.load(make_task()), OracleAgent(Task.load(make_task())), images, labels=test_label)
    assert classify(e.value) == "transient"


async def test_fault_in_a_calibration_rollout_decides_nothing(make_task, docker_client, tmp_path,
                                                               verifier_read_fails) -> None:
    task = Task.load(make_task())
    scored: list[float] = []

    async def attempt(i: int, hints: str | None) -> RolloutEvidence:
        with ReplayServer(["TASK_DONE"]) as srv:
            async with ChatClient(srv.url, "replay") as client:
                r = await rollout(task, client, ImageCache(docker_client, kinds=DomainKinds()),
                                  open_store(f"file://{tmp_path}/blobs"),
                                  LoopLimits(max_turns=2))
        scored.append(r.trajectory.reward)
        return RolloutEvidence(r.trajectory.reward, "")

    async def hints() -> str:
        return ""

    # The calibrator's handler raises (redelivery, then the dead-letter count), no reward recorded.
    with pytest.raises(TrialFault):
        await calibrate(CalibrationRule(), 0, attempt, hints)
    assert scored == []
