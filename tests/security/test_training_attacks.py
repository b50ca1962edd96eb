"""Each channel's attack (test_channels.CASES) as a policy would carry it out in training: the
solver's model, replayed, types the attack into its container during a training rollout, and the
sample the learner receives carries reward 0; an attack that left a sign of itself (bytes the
tests' process refused, a reward file root did not write) also carries it, so it can never teach.

Real parts: nats-server, the blob store, the training-rollout service and its Docker trial of the
red team's task, scored by its verifier; the solver's model is the replay server.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from replay_server import ReplayServer

from aes_lib.agents.loop import LoopLimits
from aes_lib.bundle import pack
from aes_lib.domains.kinds import DomainKinds
from aes_lib.models import ChatClient
from aes_lib.runners.trial_runner import TrialRolloutRunner
from aes_lib.sandbox import ImageCache
from aes_proto import subjects
from aes_proto.messages import RolloutRequest, TrajectoryRef

import test_channels
from test_channels import CASES, _task

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "flywheel"))
from flywheel_helpers import idle, running, training_rollouts, wait_for  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.timeout(600)]
node_image = test_channels.node_image  # the fixture, for the npm attack's image

SCREENED = {"pickle payload in the tests' process", "YAML tags in the tests' process",
            "ruamel.yaml tags in the tests' process", "jsonpickle tags in the tests' process",
            "root's git runs the agent's filter", "root's npm runs the agent's script"}
"""The attacks that leave a sign in the trial: the tests' process refused the agent's bytes, or a
reward file not written by root (the filter or script, run as nobody by root's shim, wrote one)."""


@pytest.mark.parametrize("case", list(CASES))
async def test_an_attack_in_a_training_rollout_earns_nothing(case, fresh_nats, bus, tmp_path, node_image) -> None:
    files, docker, _, attack = CASES[case]
    task = _task(tmp_path / "task", attack, files=files, dockerfile_extra=docker)
    packed = pack(task.root)
    bundle = bus.blobs.put_content("bundles", packed.data, ".tar.gz")
    req = RolloutRequest(idempotency_key="w-g0-0", episode_id="w", rollout_id="w-g0-0", env_id=packed.sha256,
                         bundle=bundle, group_id="w-g0", group_size=1, wave_id="w")
    with ReplayServer([f"```bash\n{attack}```", "TASK_DONE"], policy_version=0) as srv:
        runner = TrialRolloutRunner(ChatClient(srv.url, "replay"), ImageCache(kinds=DomainKinds()), bus.blobs,
                                    LoopLimits(max_turns=3), tmp_path / "work")
        rollouts = training_rollouts(runner)
        async with running(fresh_nats, rollouts):
            await bus.publish(subjects.ROLLOUT_REQUEST, req)
            refs = await wait_for(bus, subjects.trajectory("solver"), TrajectoryRef, bool)
            await idle(bus, rollouts)
    [ref] = refs
    assert ref.finished and ref.reward == 0.0, ref
    assert bool(ref.screened) == (case in SCREENED), ref.screened
