"""``aes regrade`` on a real stack (bus, store, Docker): a task the calibrator admitted on rewards
an older, weaker verifier gave a forgery is flagged when its stored attempts are re-scored, and
``--apply`` retires it and plans its replacement, without the agent running again."""

import json
import posixpath
from pathlib import Path

import pytest
from replay_server import ReplayServer

from aes_proto import subjects
from aes_proto.messages import CalibrationResult, CandidateEnv, Lineage, PoolEvent, PoolPlan, RolloutSummary

from aes_lib.bundle import pack
from aes_lib.flywheel.config import FlywheelConfig
from aes_lib.runners.pool_store import BUCKET, PoolStore
from aes_lib.sandbox import verifier
from aes_services.calibrator import CalibratorService
from aes_services.pool import PoolService

from flywheel_helpers import aes, idle, running, wait_for
from test_calibrator import GIVE_UP, _runner

pytestmark = pytest.mark.docker

LEDGER = Path(__file__).resolve().parents[1] / "security" / "tasks" / "ledger-sum"
# The solver's "solution": outputs that are links into the verifier's expected answer.
FORGE = ["```bash\nln -sf /tests/expected.txt /app/answer.txt && printf '#!/bin/sh\\ncat /app/answer.txt\\n' "
         "> /app/solve && chmod 755 /app/solve\n```", "TASK_DONE"]
# A band wide enough that 4 attempts decide (no expansion to 8 near an edge).
BAND = {"band_low": 0.1, "band_high": 0.9}


def _unchecked(start, target, roots, view):
    """The link rule of a verifier before links were checked: every link crosses."""
    return posixpath.normpath(posixpath.join(start, target)), True


async def test_a_task_admitted_on_forged_rewards_is_flagged_and_retired(fresh_nats, bus, tmp_path, monkeypatch):
    packed = pack(LEDGER)
    ref = bus.blobs.put_bytes(f"bundles/sha256/{packed.sha256}.tar.gz", packed.data)
    env = packed.sha256
    config = FlywheelConfig(**BAND)
    with monkeypatch.context() as old:
        old.setattr(verifier, "_resolve", _unchecked)
        with ReplayServer(FORGE * 3 + GIVE_UP) as srv:
            async with running(fresh_nats, CalibratorService(_runner(srv.url, bus, tmp_path), config),
                               PoolService(config)):
                await bus.publish(subjects.stage("calibrate"), CandidateEnv(
                    idempotency_key="a1:rev0:candidate", episode_id="a1", env_id=env, bundle=ref,
                    lineage=Lineage(assignment_id="r1-000", round=1, category="fixture", mode="agent"),
                    route=("calibrate",)))
                await wait_for(bus, subjects.POOL_EVENT, PoolEvent, lambda ms: [m for m in ms if m.kind == "admitted"])
                await idle(bus, CalibratorService)
    [result] = await bus.history(subjects.RESULT_CALIBRATION, CalibrationResult)
    assert (result.decision, result.rewards) == ("admitted", (0.5, 0.5, 0.5, 0.0))
    summaries = await bus.history(subjects.ROLLOUT_SUMMARY, RolloutSummary)
    assert len(summaries) == 4 and all(s.end_state is not None for s in summaries)

    for key, value in BAND.items():
        monkeypatch.setenv(f"AES_{key.upper()}", str(value))
    out = await aes(fresh_nats, "--progress", "plain", "regrade", "--apply", "--json", str(tmp_path / "r.json"))
    report = json.loads((tmp_path / "r.json").read_text())
    assert sorted((a["old"], a["new"]) for a in report["attempts"]) == [(0.0, 0.0)] + [(0.5, 0.0)] * 3
    [group] = report["groups"]
    assert (group["env_id"], group["purpose"], group["flagged"], group["reason"]) == (env, "calibration", True, "too_hard")
    assert "1 admitted or kept task(s) the current verifier would reject" in out and "FLAGGED: too_hard" in out

    store = PoolStore(await bus.kv(BUCKET))
    entry = await store.entry(env)
    assert entry.retired and entry.mean_reward == 0.0
    events = [e for e in await bus.history(subjects.POOL_EVENT, PoolEvent) if e.kind == "retired"]
    assert [(e.env_id, e.reason) for e in events] == [(env, "regraded: too_hard")]
    [plan] = await bus.history(subjects.POOL_PLAN, PoolPlan)
    assert (plan.retired, plan.round) == ((env,), 1)
