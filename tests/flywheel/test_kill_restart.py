"""SIGKILL every service mid-round, each once, restart it: no candidate is lost, nothing is admitted twice.

Every service runs as its own process on a real bus (real Docker for every check,
a replayed model). When a victim has received its message for the round, it is
killed with SIGKILL and started again; JetStream redelivers what it had not
acknowledged, and idempotency keys, cached rollouts and the pool's
compare-and-set make the replay harmless. The stages run one after another, so
one round kills each of them in turn (eight rounds of one kill each took eight
times as long and proved less: here a redelivered message also meets restarted
services downstream).
"""

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from aes_proto import subjects
from aes_proto.messages import CalibrationResult, PoolEvent

from aes_lib.runners.pool_store import BUCKET, PoolStore
from aes_ops.rounds import decode_any, run_rounds
from aes_ops.seeding import seed_pool
from aes_services.pool import PoolService
from aes_services.registry import ADMISSION

from flywheel_helpers import GIVE_UP_ONE, idle, one_turn_solve, register_heldout, routed_replay, wait_for
from replay_server import ReplayServer
from test_calibrator import SEED
from test_e2e_replay import REVIEW_OK, _variant_reply

pytestmark = [pytest.mark.slow, pytest.mark.docker]

SLOW = {"proposer", "validator", "strength", "review", "reset", "calibrator"}
"""Victims whose handling takes seconds: killed half a second into it; the others at once."""
SERVICES = ["proposer", *ADMISSION, "pool", "planner-stats", "planner", "pool-review"]
"""Every admission gate the registry has (the default route's), so a new one is killed too."""
TRIGGER = {
    # the victim is killed once this subject carries a message for it (its input), plus a beat
    "proposer": subjects.ASSIGNMENT,
    "validator": subjects.stage("validate"),
    "strength": subjects.stage("strength"),
    "contamination": subjects.stage("contamination"),
    "novelty": subjects.stage("novelty"),
    "review": subjects.stage("review"),
    "reset": subjects.stage("reset"),
    "calibrator": subjects.ROLLOUT_SUMMARY,  # after its first rollout: mid-calibration
    "pool": subjects.RESULT_CALIBRATION,
    "planner": subjects.POOL_PLAN,
}


def _spawn(name: str, env: dict, logs: Path) -> subprocess.Popen:
    log = open(logs / f"{name}.log", "ab")
    return subprocess.Popen([sys.executable, "-m", "aes_cli.main", "service", f"fast_ack:{name}"],
                            env=env, stdout=log, stderr=subprocess.STDOUT)


async def test_sigkill_of_each_service_mid_round_loses_nothing_and_admits_once(fresh_nats, bus, tmp_path):
    assert set(ADMISSION) <= set(TRIGGER), "every admission gate is killed once"
    s, g = one_turn_solve(SEED), GIVE_UP_ONE
    # Alternating attempts: whichever attempt a kill interrupts, any run of them keeps the mean in the band.
    solver = routed_replay([s, g] * 8, REVIEW_OK)
    proposer = ReplayServer([_variant_reply()] * 3)  # a killed proposer asks again
    logs = tmp_path / "logs"
    logs.mkdir()
    with proposer, solver:
        env = dict(os.environ, AES_NATS_URL=fresh_nats.nats_url, AES_NATS_USER=fresh_nats.nats_user,
                   AES_NATS_PASSWORD=fresh_nats.nats_password, AES_HOME=str(tmp_path / "home"),
                   AES_BLOB_URL=fresh_nats.blob_url, AES_MODEL_URL=solver.url, AES_MODEL="replay",
                   AES_PROPOSER_MODEL_URL=proposer.url, AES_PROPOSER_MODEL="replay",
                   AES_GENERATION_MODE="prompt", AES_SOLVER_MAX_TURNS="1", AES_TEST_ACK_WAIT="8",
                   AES_PROPOSALS_PER_ASSIGNMENT="1",
                   PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))
        await register_heldout(bus)
        procs = {name: _spawn(name, env, logs) for name in SERVICES}
        store = PoolStore(await bus.kv(BUCKET))
        [seeded] = await seed_pool(bus, store, [SEED])
        killed: set[str] = set()
        ending = asyncio.Event()

        def killer(victim: str):
            async def on_trigger(msg):
                if victim in killed or decode_any(msg.data) is None:
                    return
                killed.add(victim)
                if victim in SLOW:
                    await asyncio.sleep(0.5)  # let the victim take the message and start on it
                procs[victim].send_signal(signal.SIGKILL)
                procs[victim].wait()
                if not ending.is_set():  # a restart after the test ended would outlive it
                    procs[victim] = _spawn(victim, env, logs)
            return on_trigger

        subs = [await bus.nc.subscribe(subject, cb=killer(victim)) for victim, subject in TRIGGER.items()]

        async def size() -> int:
            return len((await store.index()).active)

        lines: list[str] = []
        try:
            [r1] = await run_rounds(bus, size, rounds=1, fresh=1, review=False, round_timeout=600, out=lines.append)
            assert r1.done, "\n".join(lines)
            # The pool acts on the final result after the round is over: wait until it has.
            [admitted] = [r for r in await bus.history(subjects.RESULT_CALIBRATION, CalibrationResult)
                          if r.decision == "admitted"]
            await wait_for(bus, subjects.POOL_EVENT, PoolEvent, lambda m: any(e.env_id == admitted.env_id for e in m))
            await idle(bus, PoolService)
        finally:
            ending.set()
            for sub in subs:
                await sub.unsubscribe()
            for p in procs.values():
                p.terminate()
            for p in procs.values():
                p.wait()
    assert killed == set(TRIGGER), f"never triggered: {set(TRIGGER) - killed}\n" + "\n".join(lines)
    assert r1.done and r1.finished == {"r1-000": "admitted"}, "\n".join(lines)
    results = [r for r in await bus.history(subjects.RESULT_CALIBRATION, CalibrationResult) if r.lineage.assignment_id == "r1-000"]
    assert [r.decision for r in results] == ["admitted"]
    events = await bus.history(subjects.POOL_EVENT, PoolEvent)
    assert [(e.kind, e.env_id) for e in events] == [("admitted", seeded.env_id), ("admitted", results[0].env_id)]
    assert sorted((await store.index()).active) == sorted([seeded.env_id, results[0].env_id])
