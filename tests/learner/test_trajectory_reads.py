"""A rollout's trajectory is written once and read once, by the learner (the one consumer that
needs its body): the training-rollout service publishes the summary and the learner's ref from
the solver's ``RolloutOutcome`` without reading the blob back.

Real parts: nats-server, the local blob store (wrapped to count reads per key), a Docker trial of
a seed task scored by its verifier, the solver's model replayed by the replay server, and the
learner service on a tiny Llama.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from replay_server import ReplayServer

from aes_lib.agents.loop import LoopLimits
from aes_lib.blobstore import open_store
from aes_lib.bundle import pack
from aes_lib.runners.trial_runner import TrialRolloutRunner
from aes_lib.learner import LearnerConfig
from aes_lib.models import ChatClient
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import ImageCache
from aes_proto import subjects
from aes_proto.messages import RolloutRequest, RolloutSummary, TrajectoryRef
from aes_services.learner import LearnerService

from counting_store import CountingStore, bus_over

from .helpers import tiny_llama

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "flywheel"))
from flywheel_helpers import idle, running, training_rollouts  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]

SEED = Path(__file__).resolve().parents[2] / "seeds" / "csv-sales-rollup"
SOLVE = [
    f"```bash\ncat > /tmp/solve.sh <<'AES_EOF'\n{(SEED / 'solution' / 'solve.sh').read_text()}\nAES_EOF\n```",
    "```bash\nbash /tmp/solve.sh\n```",
    "TASK_DONE",
]


async def test_the_trajectory_is_read_once_by_the_learner_and_never_by_the_rollout_service(fresh_nats, tmp_path):
    store = CountingStore(open_store(fresh_nats.blob_location))
    buses = bus_over(store)
    packed = pack(SEED)
    bundle = store.put_bytes(f"bundles/sha256/{packed.sha256}.tar.gz", packed.data)
    req = RolloutRequest(idempotency_key="w-g0-0", episode_id="w", rollout_id="w-g0-0", env_id=packed.sha256,
                         bundle=bundle, group_id="w-g0", group_size=2, wave_id="w")
    bus = await buses.connect(fresh_nats, name="test")
    try:
        with ReplayServer(SOLVE, policy_version=0) as srv:
            runner = TrialRolloutRunner(ChatClient(srv.url, "replay"), ImageCache(kinds=DomainKinds()), store,
                                        LoopLimits(max_turns=4),
                                        tmp_path)
            rollouts = training_rollouts(runner)
            async with running(fresh_nats, rollouts, bus_type=buses):
                await bus.publish(subjects.ROLLOUT_REQUEST, req)
                while not (refs := await bus.history(subjects.trajectory("solver"), TrajectoryRef, timeout=0.2)):
                    await asyncio.sleep(0.2)
                await idle(bus, rollouts)
        [ref] = refs
        [summary] = await bus.history(subjects.ROLLOUT_SUMMARY, RolloutSummary)
        key = ref.trajectory.key
        assert store.exists(key) and summary.trajectory == ref.trajectory
        assert (summary.reward, ref.reward, ref.policy_version, ref.finished) == (1.0, 1.0, 0, True)
        assert (summary.model, summary.n_turns, summary.failure) == ("replay", 3, "")
        assert store.reads[key] == 0  # the rollout service published from the solver's outcome

        tiny_llama().save_pretrained(tmp_path / "model")
        learner = LearnerService(LearnerConfig(model_path=str(tmp_path / "model"), solver_group_size=2))
        async with running(fresh_nats, learner, bus_type=buses):
            while "w-g0-0" not in getattr(learner, "held", {}):  # the sample waits for its group's other member
                await asyncio.sleep(0.2)
            await idle(bus, learner)
        assert store.reads[key] == 1  # the learner, which trains on its body
    finally:
        await bus.close()
