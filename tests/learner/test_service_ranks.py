"""``aes service learner`` on 2 ranks (``AES_LEARNER_NPROC=2``, as ``aes up`` starts it): torchrun,
rank 0 on the real bus, one update the orchestrator packed into a share per rank, each rank
reading its own, an HF-format version the torch
engine loads, and no rank left behind after SIGTERM."""

import asyncio
import os
import subprocess
import sys
import time

import pytest
import torch

from aes_lib.bus import Bus
from aes_lib.learner import LearnerConfig, policy_tensors
from aes_lib.models.engine import TorchEngine
from aes_proto import subjects
from aes_proto.messages import LearnerStats, PolicyVersion, TrainBatch
from aes_services.orchestrator import OrchestratorService

from .helpers import tiny_llama
from .test_service import publish_group, serving, until

pytestmark = pytest.mark.timeout(300)


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []


async def test_learner_on_two_ranks_trains_and_publishes(fresh_nats, tmp_path):
    tiny_llama(seed=0).save_pretrained(tmp_path / "model")
    env = dict(os.environ, AES_NATS_URL=fresh_nats.nats_url, AES_NATS_USER=fresh_nats.nats_user,
               AES_NATS_PASSWORD=fresh_nats.nats_password, AES_HOME=str(fresh_nats.home),
               AES_BLOB_URL=fresh_nats.blob_location, AES_LEARNER_MODEL_PATH=str(tmp_path / "model"),
               AES_LEARNER_NPROC="2", AES_LEARNER_SOLVER_GROUP_SIZE="4", AES_LEARNER_GROUPS_PER_BATCH="2",
               AES_LEARNER_LR="1e-2")
    ready = tmp_path / "ready"
    log = open(tmp_path / "learner.log", "wb")
    launcher = subprocess.Popen([sys.executable, "-m", "aes_cli.main", "service", "learner", "--ready-file", str(ready)],
                                env=env, stdout=log, stderr=subprocess.STDOUT)
    ranks: list[int] = []
    try:
        async with await Bus.connect(fresh_nats) as bus:
            while not ready.exists():
                assert launcher.poll() is None, (tmp_path / "learner.log").read_text()[-3000:]
                await asyncio.sleep(0.2)
            ranks = _children(launcher.pid)
            assert len(ranks) == 2  # torchrun's agent (the launcher's pid) runs both ranks
            await publish_group(bus, "env-a", 3, [4, 1, 2, 5], [1, 0, 0, 0])
            await publish_group(bus, "env-c", 8, [9, 9, 0, 1], [1, 1, 0, 0])
            async with serving(fresh_nats, OrchestratorService(LearnerConfig(solver_group_size=4, groups_per_batch=2,
                                                                             nproc=2))):
                (pv,) = await until(bus, subjects.POLICY_VERSION, PolicyVersion, 1)
                (stats,) = await until(bus, subjects.LEARNER_STATS, LearnerStats, 1)
            (batch,) = await until(bus, subjects.train_batch("shared"), TrainBatch, 1)
            assert len(batch.shares) == 2 and min(batch.share_micro) >= 1  # both ranks had work
            assert stats.ranks == 2 and stats.tokens == 16 and stats.group_ids == ("env-a", "env-c")
            engine = TorchEngine(tiny_llama(seed=0))
            assert engine.load_state_dict(policy_tensors(bus.blobs, pv.checkpoint), pv.version)
            engine.close()
            assert not torch.equal(engine.model.lm_head.weight, tiny_llama(seed=0).lm_head.weight)
    finally:
        launcher.terminate()
        launcher.wait(timeout=60)
    deadline = time.monotonic() + 30
    while any(os.path.exists(f"/proc/{p}") for p in ranks) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(os.path.exists(f"/proc/{p}") for p in ranks)
