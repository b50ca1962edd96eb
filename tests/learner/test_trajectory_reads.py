"""A rollout's trajectory is written once and read once, by the orchestrator (the one consumer
that needs its body): the training-rollout service publishes the summary and the learner's ref
from the solver's ``RolloutOutcome`` without reading the blob back, and a restarted learner
(trainer) or orchestrator reads no trained trajectory again.

Real parts: nats-server, the local blob store (wrapped to count reads per key), a Docker trial of
a seed task scored by its verifier, the solver's model replayed by the replay server, and the
orchestrator and learner services on a tiny Llama.
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
from aes_proto.messages import LearnerStats, RolloutRequest, RolloutSummary, TrainBatch, TrajectoryRef
from aes_services.learner import LearnerService
from aes_services.orchestrator import OrchestratorService

from counting_store import CountingStore, bus_over

from .helpers import tiny_llama
from .test_service import publish_group, until

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "flywheel"))
from flywheel_helpers import idle, running, training_rollouts  # noqa: E402

pytestmark = [pytest.mark.timeout(300)]

SEED = Path(__file__).resolve().parents[2] / "seeds" / "csv-sales-rollup"
SOLVE = [
    f"```bash\ncat > /tmp/solve.sh <<'AES_EOF'\n{(SEED / 'solution' / 'solve.sh').read_text()}\nAES_EOF\n```",
    "```bash\nbash /tmp/solve.sh\n```",
    "TASK_DONE",
]


@pytest.mark.docker
async def test_the_trajectory_is_read_once_by_the_orchestrator_and_never_by_the_rollout_service(fresh_nats, tmp_path):
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
        orchestrator = OrchestratorService(LearnerConfig(model_path=str(tmp_path / "model"), solver_group_size=2))
        async with running(fresh_nats, orchestrator, bus_type=buses):
            while "w-g0-0" not in orchestrator.held:  # the sample waits for its group's other member
                await asyncio.sleep(0.2)
            await idle(bus, orchestrator)
        assert store.reads[key] == 1  # the orchestrator, which packs its body
    finally:
        await bus.close()


async def test_restarts_read_no_trained_trajectory(fresh_nats, tmp_path):
    """The learner trains from packed shares: restarted (replaying its update from the last save),
    it reads no trajectory; a restarted orchestrator re-reads only the samples it still holds."""
    store = CountingStore(open_store(fresh_nats.blob_location))
    buses = bus_over(store)
    tiny_llama(seed=0).save_pretrained(tmp_path / "model")
    config = LearnerConfig(model_path=str(tmp_path / "model"), solver_group_size=4, groups_per_batch=2,
                           checkpoint_every=8)  # the restart replays the update
    bus = await buses.connect(fresh_nats, name="test")
    try:
        await publish_group(bus, "env-a", 3, [4, 1, 2, 5], [1, 0, 0, 0])
        await publish_group(bus, "env-c", 8, [9, 9, 0, 1], [1, 1, 0, 0])
        await publish_group(bus, "env-d", 1, [2, 3], [1, 0])  # incomplete: held
        orchestrator, learner = OrchestratorService(config), LearnerService(config)
        async with running(fresh_nats, orchestrator, learner, bus_type=buses):
            await until(bus, subjects.LEARNER_STATS, LearnerStats, 1)
            await idle(bus, orchestrator)
        refs = {r.rollout_id: r.trajectory.key for r in await bus.history(subjects.TRAJECTORIES, TrajectoryRef)}
        assert len(refs) == 10 and all(store.reads[k] == 1 for k in refs.values())
        before = dict(store.reads)

        restarted = LearnerService(config)
        await restarted.setup(bus)
        assert restarted.version == 1 and len(restarted.state.replay) == 1
        again = OrchestratorService(config)
        await again.setup(bus)
        assert again.batch_id == 1
        reread = {rid for rid, k in refs.items() if store.reads[k] > before.get(k, 0)}
        assert reread == {"env-d-0", "env-d-1"}  # the held ones, by the orchestrator; none by the learner
        [batch] = await bus.history(subjects.train_batch("shared"), TrainBatch)
        assert all(store.reads[s.key] == before[s.key] + 1 for s in batch.shares)  # the replay read its share
    finally:
        await bus.close()
