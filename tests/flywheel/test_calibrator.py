"""The calibrator service on a real bus, with real Docker trials of a seed task.

The solver's model is the replay server (a recorded conversation): each attempt
either really solves the task (writes and runs the reference solution) or gives
up at once, so the rewards come from the task's real verifier.
"""

import json
from pathlib import Path

import msgspec
import pytest
from replay_server import ReplayServer

from aes_proto import subjects
from aes_proto.messages import Assignment, CalibrationResult, CandidateEnv, Lineage, RolloutSummary, TrajectoryRef

from aes_lib.agents.loop import LoopLimits
from aes_lib.bus import stream_for
from aes_lib.bundle import pack
from aes_lib.flywheel.config import FlywheelConfig
from aes_lib.runners.trial_runner import TrialRolloutRunner
from aes_lib.models import ChatClient
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import ImageCache
from aes_services.calibrator import CalibratorService

from flywheel_helpers import drain_workqueue, idle, running, wait_for

pytestmark = pytest.mark.docker

SEED = Path(__file__).resolve().parents[2] / "seeds" / "csv-sales-rollup"
SOLVE = [
    f"```bash\ncat > /tmp/solve.sh <<'AES_EOF'\n{(SEED / 'solution' / 'solve.sh').read_text()}\nAES_EOF\n```",
    "```bash\nbash /tmp/solve.sh\n```",
    "TASK_DONE",
]
GIVE_UP = ["TASK_DONE"]


def _candidate(bus, revision=0, mode="agent", task=SEED):
    packed = pack(task)
    ref = bus.blobs.put_bytes(f"bundles/sha256/{packed.sha256}.tar.gz", packed.data)
    return CandidateEnv(
        idempotency_key=f"a1:rev{revision}:candidate", episode_id="a1", env_id=packed.sha256, bundle=ref,
        lineage=Lineage(assignment_id="r2-000", round=2, revision=revision, category="data-processing", mode=mode),
        route=("calibrate",),
    )


def _runner(url, bus, tmp_path):
    return TrialRolloutRunner(ChatClient(url, "replay"), ImageCache(kinds=DomainKinds()),
                              bus.blobs, LoopLimits(max_turns=4), tmp_path)


async def test_admits_a_task_the_solver_solves_half_the_time(fresh_nats, bus, tmp_path):
    with ReplayServer(SOLVE + GIVE_UP + SOLVE + GIVE_UP) as srv:
        async with running(fresh_nats, CalibratorService(_runner(srv.url, bus, tmp_path), FlywheelConfig())):
            c = _candidate(bus)
            await bus.publish(subjects.stage("calibrate"), c)
            [result] = await wait_for(bus, subjects.RESULT_CALIBRATION, CalibrationResult, lambda m: m)
            await idle(bus, CalibratorService)
    assert not srv.errors
    assert (result.decision, result.rewards, result.proposer_reward) == ("admitted", (1.0, 0.0, 1.0, 0.0), 1.0)
    assert (result.env_id, result.bundle, result.resubmitted, result.lineage) == (c.env_id, c.bundle, False, c.lineage)
    assert result.verdicts[-1].stage == "calibrate" and result.verdicts[-1].ok
    summaries = await bus.history(subjects.ROLLOUT_SUMMARY, RolloutSummary)
    assert [s.reward for s in summaries] == [1.0, 0.0, 1.0, 0.0]
    assert {s.purpose for s in summaries} == {"calibration"}
    # Calibration attempts are no on-policy training group: the learner never sees them.
    assert await bus.history(subjects.TRAJECTORIES, TrajectoryRef) == []


async def test_too_hard_runs_a_diagnostic_with_hints_and_sends_a_revision(fresh_nats, bus, tmp_path):
    with ReplayServer(GIVE_UP * 4 + SOLVE) as srv:
        async with running(fresh_nats, CalibratorService(_runner(srv.url, bus, tmp_path), FlywheelConfig())):
            c = _candidate(bus, revision=1)
            await bus.publish(subjects.stage("calibrate"), c)
            [result] = await wait_for(bus, subjects.RESULT_CALIBRATION, CalibrationResult, lambda m: m)
            [revision] = await drain_workqueue(bus, subjects.ASSIGNMENT, Assignment, 1)
    assert (result.decision, result.rewards, result.resubmitted) == ("too_hard", (0.0,) * 4, True)
    assert 0 < result.proposer_reward < 1
    # The diagnostic attempt saw the reference solution in its prompt and solved the task.
    assert "Hints:" in srv.requests[4]["messages"][1]["content"]
    assert "parse_amount" in srv.requests[4]["messages"][1]["content"]
    diag = [s for s in await bus.history(subjects.ROLLOUT_SUMMARY, RolloutSummary) if s.purpose == "diagnostic"]
    assert [d.reward for d in diag] == [1.0]
    lin = revision.lineage
    assert (lin.assignment_id, lin.revision, lin.round, revision.direction) == ("r2-000", 2, 2, "easier")
    assert result.lineage == c.lineage and lin.category == "data-processing"
    assert revision.previous_bundle == c.bundle and "hints scored 1.00" in revision.feedback


async def test_a_seed_out_of_band_is_decided_without_a_diagnostic_or_a_revision(fresh_nats, bus, tmp_path):
    with ReplayServer(GIVE_UP * 4 + SOLVE) as srv:
        async with running(fresh_nats, CalibratorService(_runner(srv.url, bus, tmp_path), FlywheelConfig())):
            await bus.publish(subjects.stage("calibrate"), _candidate(bus, mode="seed"))
            [result] = await wait_for(bus, subjects.RESULT_CALIBRATION, CalibrationResult, lambda m: m)
            await idle(bus, CalibratorService)
    assert (result.decision, result.rewards, result.resubmitted) == ("too_hard", (0.0,) * 4, False)
    assert len(srv.requests) == 4  # no diagnostic attempt with hints
    assert (await bus.js.stream_info(stream_for(subjects.ASSIGNMENT))).state.messages == 0


def _without_solution(tmp_path):
    import shutil

    task = tmp_path / "imported" / SEED.name
    shutil.copytree(SEED, task)
    shutil.rmtree(task / "solution")  # published the way training-environment sets are: tests only
    return task


async def test_an_imported_task_without_a_reference_some_attempts_pass_joins_the_pool_marked(fresh_nats, bus, tmp_path):
    import tomllib

    from aes_lib.runners.pool_store import BUCKET, PoolStore
    from aes_ops.seeding import export, send_to_calibration
    from aes_services.pool import PoolService

    config = FlywheelConfig()
    with ReplayServer(SOLVE + GIVE_UP + SOLVE + GIVE_UP) as srv:
        async with running(fresh_nats, CalibratorService(_runner(srv.url, bus, tmp_path), config), PoolService(config)):
            [c] = await send_to_calibration(bus, [_without_solution(tmp_path)])
            [result] = await wait_for(bus, subjects.RESULT_CALIBRATION, CalibrationResult, lambda m: m)
            await idle(bus, CalibratorService)
            await idle(bus, PoolService)
    assert not srv.errors and c.no_reference and c.lineage.mode == "seed"
    assert (result.decision, result.rewards, result.no_reference) == ("admitted", (1.0, 0.0, 1.0, 0.0), True)
    [entry] = await PoolStore(await bus.kv(BUCKET)).active_entries()
    assert entry.env_id == c.env_id and entry.no_reference and entry.source == "seed"  # imported: a seed
    manifest = export([entry], bus.blobs, tmp_path / "export")
    [meta] = tomllib.loads(manifest.read_text())["metadata"]["aes"]
    assert meta["no_reference"] is True


async def test_an_imported_task_without_a_reference_no_attempt_passes_stays_out(fresh_nats, bus, tmp_path):
    from aes_lib.runners.pool_store import BUCKET, PoolStore
    from aes_ops.seeding import send_to_calibration
    from aes_services.pool import PoolService

    config = FlywheelConfig()
    with ReplayServer(GIVE_UP * 4 + SOLVE) as srv:
        async with running(fresh_nats, CalibratorService(_runner(srv.url, bus, tmp_path), config), PoolService(config)):
            await send_to_calibration(bus, [_without_solution(tmp_path)])
            [result] = await wait_for(bus, subjects.RESULT_CALIBRATION, CalibrationResult, lambda m: m)
            await idle(bus, CalibratorService)
            await idle(bus, PoolService)
    assert (result.decision, result.resubmitted, result.no_reference) == ("unverified_too_hard", False, True)
    assert result.verdicts[-1].reason == "unverified_too_hard" and not result.verdicts[-1].ok
    assert len(srv.requests) == 4  # no diagnostic: there is no reference solution to hint with
    assert (await PoolStore(await bus.kv(BUCKET)).index()).active == ()
    assert (await bus.js.stream_info(stream_for(subjects.ASSIGNMENT))).state.messages == 0


AUDITOR = "auditor"


def _broken(tmp_path):
    """The seed with a defect validation cannot see: its tests and reference agree on an output path
    the instruction never names, so an attempt that does exactly what the instruction says scores 0."""
    import shutil

    task = tmp_path / "broken" / SEED.name
    shutil.copytree(SEED, task)
    for rel in ("tests/test_rollup.py", "solution/solve.sh"):
        path = task / rel
        path.write_text(path.read_text().replace("/app/out/monthly_region.csv", "/app/out/monthly.csv"))
    return task


def _audited(monkeypatch, url):
    monkeypatch.setenv("AES_AUDIT_ENABLED", "1")
    monkeypatch.setenv("AES_AUDIT_MODEL_URL", url)
    monkeypatch.setenv("AES_AUDIT_MODEL", AUDITOR)


async def test_a_broken_task_below_the_band_is_audited_a_defect_and_sent_back_for_repair(fresh_nats, bus, tmp_path, monkeypatch):
    reason = "tests/test_rollup.py reads /app/out/monthly.csv; the instruction asks for /app/out/monthly_region.csv"
    # The solver does what the instruction says (the seed's own reference) every time, hints or not.
    with ReplayServer(SOLVE * 5) as solver, ReplayServer([json.dumps({"label": "defect", "reason": reason})], model=AUDITOR) as auditor:
        _audited(monkeypatch, auditor.url)
        async with running(fresh_nats, CalibratorService(_runner(solver.url, bus, tmp_path), FlywheelConfig())):
            c = _candidate(bus, task=_broken(tmp_path))
            await bus.publish(subjects.stage("calibrate"), c)
            [result] = await wait_for(bus, subjects.RESULT_CALIBRATION, CalibrationResult, lambda m: m)
            [revision] = await drain_workqueue(bus, subjects.ASSIGNMENT, Assignment, 1)
    assert not solver.errors and not auditor.errors
    assert (result.decision, result.rewards, result.resubmitted) == ("too_hard", (0.0,) * 4, True)
    [audit] = [v for v in result.verdicts if v.stage == "audit"]
    assert (audit.ok, audit.reason) == (False, "defect") and reason in audit.detail and AUDITOR in audit.detail
    assert result.proposer_reward == 0.0  # a broken task earns what one failing validation earns
    assert revision.direction == "revise" and "broken, not hard: " + reason in revision.feedback
    # The auditor read the task's files and the real failed attempts (their commands, the tests' output).
    [asked] = auditor.requests
    prompt = asked["messages"][-1]["content"]
    assert "=== instruction.md ===" in prompt and "/app/out/monthly.csv" in prompt
    assert "$ bash /tmp/solve.sh" in prompt and "monthly.csv was not written" in prompt
    assert "reference solution as hints scored 0.00" in prompt


async def test_a_hard_task_is_audited_hard_asks_for_an_easier_variant_and_a_redelivery_asks_nothing_again(
        fresh_nats, bus, tmp_path, monkeypatch):
    reason = "the instruction names every rule the tests check; the attempts stopped before any work"
    with ReplayServer(GIVE_UP * 4 + SOLVE) as solver, ReplayServer([json.dumps({"label": "hard", "reason": reason})], model=AUDITOR) as auditor:
        _audited(monkeypatch, auditor.url)
        async with running(fresh_nats, CalibratorService(_runner(solver.url, bus, tmp_path), FlywheelConfig())):
            c = _candidate(bus)
            await bus.publish(subjects.stage("calibrate"), c)
            await wait_for(bus, subjects.RESULT_CALIBRATION, CalibrationResult, lambda m: m)
            # Delivered again (as after a crash before the ack): rollouts and audit come from KV.
            await bus.publish(subjects.stage("calibrate"), msgspec.structs.replace(c, idempotency_key=c.idempotency_key + ":again"))
            first, again = await wait_for(bus, subjects.RESULT_CALIBRATION, CalibrationResult, lambda m: len(m) == 2)
            await drain_workqueue(bus, subjects.ASSIGNMENT, Assignment, 1)
    assert not solver.errors and not auditor.errors
    assert len(auditor.requests) == 1 and len(solver.requests) == len(GIVE_UP * 4 + SOLVE)  # the second delivery reused both
    for result in (first, again):
        [audit] = [v for v in result.verdicts if v.stage == "audit"]
        assert (result.decision, audit.ok, audit.reason) == ("too_hard", True, "hard")
        assert 0 < result.proposer_reward < 1
    assert "An audit labelled it hard: " + reason in first.verdicts[-1].detail
    assert "Make the task easier" in first.verdicts[-1].detail
