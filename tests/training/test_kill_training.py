"""SIGKILL a learner rank, the orchestrator and the training-rollout service mid-batch, again and again.

All three run as their own processes (``aes service``) on a real bus, with real Docker
rollouts against the torch engine; the learner (the trainer) runs on 2 gloo ranks
(``--nproc 2``: torchrun's agent and its two ranks), each reading its own packed share of
an update, and saves its full training state every second update (the batches between are
stepped again from their packed shares). While three waves are in flight, the services are
SIGKILLed in turn (a learner rank twice: rank 0, the consumer, then rank 1; the orchestrator
twice; the rollouts service once): torchrun restarts both ranks, the others are restarted by
the test. Afterwards every attempt was published exactly once, every group with a reward
spread was trained in exactly one update, versions are consecutive, the learner resumes
from the last one, the orchestrator holds nothing, and only the packed batches the last
save does not cover are still stored.
"""

import asyncio
import dataclasses
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from nats.js.errors import NoKeysError

from aes_lib.runners.pool_store import BUCKET, PoolStore
from aes_ops.seeding import seed_pool
from aes_lib.learner import checkpoint_key
from aes_lib.learner.advantages import has_signal
from aes_lib.models.torch_serve import serve
from aes_proto import subjects
from aes_proto.messages import BlobRef, LearnerStats, PolicyVersion, TrainBatch, TrainingWave, TrajectoryRef
from aes_proto.records import LEARNER_BUCKET, ORCHESTRATOR_BUCKET
from aes_services.learner import LearnerState, LearnerService
from aes_services.orchestrator import OrchestratorService
from aes_services.serving import WeightSyncService
from aes_services.training import WavePlannerService

from conftest import TASKS, WORD_WAVES
from flywheel_helpers import idle, running, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1200)]

WAVES, GROUPS, SIZE = 3, 2, 4
KILLS = ("learner:0", "orchestrator", "rollouts", "learner:1", "orchestrator")
"""Each restart of the ranks costs two torch imports and a model load on 2 cores."""
RANKS = 2
FLYWHEEL = Path(__file__).resolve().parents[1] / "flywheel"


def _spawn(name: str, env: dict, logs: Path) -> subprocess.Popen:
    log = open(logs / f"{name}.log", "ab")
    extra = ["--nproc", str(RANKS)] if name == "learner" else []
    return subprocess.Popen([sys.executable, "-m", "aes_cli.main", "service", f"fast_ack:{name}", *extra],
                            env=env, stdout=log, stderr=subprocess.STDOUT)


def _ranks(launcher: subprocess.Popen) -> dict[int, int]:
    """{rank: pid} of the learner's ranks: the children of torchrun's agent (the launcher's pid)."""
    out = {}
    children = Path(f"/proc/{launcher.pid}/task/{launcher.pid}/children").read_text().split()
    for pid in map(int, children):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for kv in env:
            if kv.startswith(b"RANK="):
                out[int(kv[5:])] = pid
    return out


async def _kill_rank(launcher: subprocess.Popen, rank: int) -> None:
    for _ in range(600):  # after a restart the ranks take a moment to appear
        if (pid := _ranks(launcher).get(rank)) is not None:
            os.kill(pid, signal.SIGKILL)
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"learner rank {rank} never appeared")


async def test_sigkills_lose_no_sample_and_train_none_twice(fresh_nats, bus, word_policy, tmp_path, monkeypatch):
    monkeypatch.setenv("AES_HOME", str(fresh_nats.home))
    monkeypatch.setenv("AES_BLOB_URL", fresh_nats.blob_location)
    server, url = serve(word_policy)
    settings = dataclasses.replace(fresh_nats, model_url=url, engine="torch")
    await seed_pool(bus, PoolStore(await bus.kv(BUCKET)), [TASKS / "word-banana", TASKS / "word-banana-alt"])
    logs = tmp_path / "logs"
    logs.mkdir()
    env = dict(os.environ, AES_NATS_URL=fresh_nats.nats_url, AES_NATS_USER=fresh_nats.nats_user,
               AES_NATS_PASSWORD=fresh_nats.nats_password, AES_HOME=str(fresh_nats.home),
               AES_BLOB_URL=fresh_nats.blob_location, AES_MODEL_URL=url, AES_ENGINE="torch",
               AES_TRAINING_MAX_TURNS=str(WORD_WAVES["max_turns"]),
               AES_TRAINING_MAX_TOKENS=str(WORD_WAVES["max_tokens"]), AES_TRAINING_TEMPERATURE="0.7",
               AES_LEARNER_MODEL_PATH=str(word_policy), AES_LEARNER_GROUPS_PER_BATCH="1", AES_LEARNER_LR="5e-4",
               AES_LEARNER_NPROC=str(RANKS),  # the orchestrator packs a share per rank
               AES_LEARNER_KEEP_CHECKPOINTS="2", AES_LEARNER_CHECKPOINT_EVERY="2",
               # Kill safety, not staleness: restarts let the learner race ahead of the engine, and a
               # group sampled too many versions back would be dropped by design, not trained.
               AES_LEARNER_MAX_POLICY_LAG="1000",
               AES_TEST_ACK_WAIT="6", PYTHONPATH=os.pathsep.join([str(FLYWHEEL), os.environ.get("PYTHONPATH", "")]))
    victims = ("learner", "orchestrator", "rollouts")
    procs = {name: _spawn(name, env, logs) for name in victims}
    rng = random.Random(7)
    kills: list[str] = []
    try:
        async with running(settings, WavePlannerService(), WeightSyncService()):
            for w in range(WAVES):
                await bus.publish(subjects.TRAINING_WAVE, TrainingWave(
                    idempotency_key=f"kw{w}", episode_id=f"kw{w}", wave_id=f"kw{w}", groups=GROUPS, group_size=SIZE))
            for victim in KILLS:
                await asyncio.sleep(rng.uniform(3, 7))  # services restart in a few seconds; hit them mid-work
                name, _, rank = victim.partition(":")
                if name == "learner":  # one rank; torchrun restarts the group
                    await _kill_rank(procs["learner"], int(rank))
                    kills.append(f"learner rank {rank}")
                else:
                    procs[name].send_signal(signal.SIGKILL)
                    procs[name].wait()
                    kills.append(name)
                    procs[name] = _spawn(name, env, logs)
            refs = await wait_for(bus, subjects.TRAJECTORIES, TrajectoryRef, lambda m: len(m) >= WAVES * GROUPS * SIZE)
            await idle(bus, OrchestratorService)
            await idle(bus, LearnerService)
    finally:
        learner_alive = procs["learner"].poll() is None
        for p in procs.values():
            p.terminate()
        for p in procs.values():
            p.wait()
        server.shutdown()
    assert learner_alive, "torchrun gave up on the learner (see its log)"

    # Every attempt published exactly once.
    assert sorted(r.rollout_id for r in refs) == sorted({r.rollout_id for r in refs})
    assert len(refs) == WAVES * GROUPS * SIZE
    groups: dict[str, list[float]] = {}
    for r in refs:
        groups.setdefault(r.group_id, []).append(r.reward)
    # Every group with a spread trained in exactly one version; versions run 1..N without a gap.
    stats = {s.policy_version: s for s in await bus.history(subjects.LEARNER_STATS, LearnerStats)}
    trained = [g for s in stats.values() for g in s.group_ids]
    assert sorted(trained) == sorted(g for g, rewards in groups.items() if has_signal(rewards))
    assert sorted(stats) == list(range(1, len(stats) + 1))
    # The learner's saved state is the last version, holding nothing.
    entry = await (await bus.kv(LEARNER_BUCKET)).get("learner")
    state = msgspec.msgpack.decode(bus.blobs.get_bytes(msgspec.json.decode(entry.value, type=BlobRef)),
                                   type=LearnerState)
    versions = await bus.history(subjects.POLICY_VERSION, PolicyVersion)
    assert state.policy.version == max(v.version for v in versions) == len(stats)
    # The orchestrator holds no sample: every group was batched or dropped.
    kv = await bus.kv(ORCHESTRATOR_BUCKET)
    try:
        assert await kv.keys() == []
    except NoKeysError:
        pass
    # The training state was saved every second update; the batches since are in the replay log,
    # and their packed shares are the only ones still stored.
    assert state.train_version == len(stats) - len(state.replay) and len(state.replay) < 2
    assert [b.batch_id for b in state.replay] == list(range(state.train_version + 1, len(stats) + 1))
    batches = {b.batch_id: b for b in await bus.history(subjects.train_batch("shared"), TrainBatch)}
    assert sorted(batches) == sorted(stats)  # one batch per version, none published twice
    assert all(len(b.shares) == RANKS for b in batches.values())
    stored = {i for i, b in batches.items() if any(bus.blobs.exists(s.key) for s in b.shares)}
    assert stored == {b.batch_id for b in state.replay}
    saves = sorted(p.name for p in (fresh_nats.home / "learner" / "learner" / "checkpoints/policy").iterdir())
    assert saves == ([f"v{state.train_version:06d}"] if state.train_version else [])
    # Only the newest two published versions are kept.
    kept = [v for v in range(1, len(stats) + 1) if bus.blobs.exists(checkpoint_key("checkpoints/policy", v))]
    assert kept == list(range(1, len(stats) + 1))[-2:]
    print(f"\n{len(kills)} kills ({', '.join(kills)}); {len(refs)} attempts; {len(stats)} updates; "
          f"groups without spread: {sum(not has_signal(r) for r in groups.values())}")
