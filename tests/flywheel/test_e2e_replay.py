"""End to end with a replayed model: every service on a real bus, real Docker for every check.

Round 1 plans one assignment from the only seed in the pool; the proposer (Prompt
mode, replayed) writes a variant of the seed; the variant passes validation,
contamination, review and the reset gate, and calibrates into the band: the pool
grows by one. Round 2 reviews the pool with the updated solver, which now solves
the seed every time: the seed is retired as too easy and the planner asks for
its replacement (the proposer's replay is over, so that attempt ends as a
recorded model error).
"""

import dataclasses
import json

import pytest
from replay_server import ReplayServer

from aes_proto import subjects
from aes_proto.messages import CalibrationResult, GateResult, PoolEvent, ReviewResult, ValidationResult

from aes_lib.config import Settings
from aes_lib.agents.proposer.files import format_files
from aes_lib.flywheel.config import FlywheelConfig
from aes_lib.runners.pool_store import BUCKET, PoolStore
from aes_ops.readout import snapshot
from aes_ops.rounds import run_rounds
from aes_ops.seeding import seed_pool
from aes_lib.review.rubric import CRITERION_NAMES

from flywheel_helpers import GIVE_UP_ONE, all_services, one_turn_solve, register_heldout, routed_replay, running
from test_calibrator import SEED

pytestmark = [pytest.mark.slow, pytest.mark.docker]


def _variant_reply(solve: str | None = None, tests: dict[str, str] | None = None) -> str:
    """The seed's files with a new first line, ``solve`` as its reference solution and ``tests``
    (path -> text) in place of its own, where given."""
    files = {str(p.relative_to(SEED)): p.read_text() for p in sorted(SEED.rglob("*"))
             if p.is_file() and p.relative_to(SEED).as_posix() != "tests/test.sh"}
    files["instruction.md"] = "Variant for the replay test.\n\n" + files["instruction.md"]
    if solve is not None:
        files["solution/solve.sh"] = solve
    files.update(tests or {})
    return format_files(files)


REVIEW_OK = json.dumps({name: {"outcome": "pass", "reason": "checked"} for name in CRITERION_NAMES})


async def test_round_admits_a_variant_then_review_retires_the_seed(fresh_nats, bus, tmp_path):
    s, g = one_turn_solve(SEED), GIVE_UP_ONE
    solver_replies = [s, g, s, g]  # calibration of the variant: mean 0.5
    solver_replies += [s, s, s, s] + [s, g, s, g]  # pool review: the seed (now too easy), then the variant
    config = FlywheelConfig(generation_mode="prompt", assignments_per_round=1, solver_max_turns=1,
                            proposals_per_assignment=1)
    lines: list[str] = []
    with ReplayServer([_variant_reply()]) as proposer, routed_replay(solver_replies, REVIEW_OK) as solver:
        settings = dataclasses.replace(fresh_nats, model_url=solver.url, model="replay",
                                       proposer_model_url=proposer.url, proposer_model="replay")
        store = PoolStore(await bus.kv(BUCKET))
        [seeded] = await seed_pool(bus, store, [SEED])
        await register_heldout(bus)

        async def size() -> int:
            return len((await store.index()).active)

        async with running(settings, *all_services(config)):
            [r1] = await run_rounds(bus, size, rounds=1, fresh=1, review=False, round_timeout=600, out=lines.append)
            [r2] = await run_rounds(bus, size, rounds=1, fresh=0, review=True, round_timeout=600, out=lines.append)
    assert not solver.errors, solver.errors
    assert r1.done and r1.finished == {"r1-000": "admitted"}, lines
    assert r2.done and r2.finished == {f"r2-replace-{seeded.env_id[:16]}": "proposer:model_error"}, lines

    results = await bus.history(subjects.RESULT_CALIBRATION, CalibrationResult)
    [admitted] = [r for r in results if r.decision == "admitted"]
    assert admitted.rewards == (1.0, 0.0, 1.0, 0.0)
    assert [v.stage for v in admitted.verdicts] == list(Settings().route_stages)  # every stage of the default route
    assert all(v.ok for v in admitted.verdicts) and admitted.verdicts[2].reason == "ok"  # checked against the index
    # every stage's outcome is on its result stream
    assert [v.reason for v in await bus.history(subjects.RESULT_VALIDATION, ValidationResult)] == ["ok"]
    assert len(await bus.history(subjects.RESULT_REVIEW, ReviewResult)) == 1
    assert [g.gate for g in await bus.history(subjects.RESULT_GATE, GateResult)] == ["strength", "novelty", "reset"]

    events = await bus.history(subjects.POOL_EVENT, PoolEvent)
    assert [(e.kind, e.env_id) for e in events] == [
        ("admitted", seeded.env_id), ("admitted", admitted.env_id), ("retired", seeded.env_id)]
    assert events[-1].reason == "too_easy"
    assert (await store.index()).active == (admitted.env_id,)
    assert any(line.startswith("assignment r1-000") for line in lines)
    assert any("result r1-000 rev0: admitted" in line for line in lines)


async def test_a_third_party_gate_on_the_route_judges_the_round(fresh_nats, bus, tmp_path):
    """``NamesItsDataGate`` lives in the test folder; naming its stage in AES_ROUTE is all it
    takes to have it judge the round's candidates (here it rejects the variant, whose
    instruction was rewritten to name no /app/ path)."""
    from domain_gate import NamesItsDataGate

    files = {str(p.relative_to(SEED)): p.read_text() for p in sorted(SEED.rglob("*"))
             if p.is_file() and p.relative_to(SEED).as_posix() != "tests/test.sh"}
    files["instruction.md"] = "Count the rows of the input file and print how many there are.\n"
    # One proposal, decided at once: no revision to send back.
    config = FlywheelConfig(generation_mode="prompt", assignments_per_round=1, solver_max_turns=1,
                            proposals_per_assignment=1, max_revisions=0)
    gate = NamesItsDataGate()
    gate.max_revisions = config.max_revisions
    lines: list[str] = []
    with ReplayServer([format_files(files)]) as proposer, routed_replay([], REVIEW_OK) as solver:
        settings = dataclasses.replace(fresh_nats, model_url=solver.url, model="replay", proposer_model_url=proposer.url,
                                       proposer_model="replay", route="validate,names-data,calibrate")
        store = PoolStore(await bus.kv(BUCKET))
        await seed_pool(bus, store, [SEED])

        async def size() -> int:
            return len((await store.index()).active)

        async with running(settings, gate, *all_services(config)):
            [r1] = await run_rounds(bus, size, rounds=1, fresh=1, review=False, round_timeout=600, out=lines.append)
    assert r1.done and r1.finished == {"r1-000": "names-data:no_data_path"}, lines
    [result] = await bus.history(subjects.RESULT_CALIBRATION, CalibrationResult)
    assert [(v.stage, v.ok) for v in result.verdicts] == [("validate", True), ("names-data", False)]
    [record] = await bus.history(subjects.RESULT_GATE, GateResult)
    assert (record.gate, record.reason) == ("names-data", "no_data_path")


async def _rejected_then_revised(fresh_nats, bus, first: str):
    """One round whose proposer replies ``first``, then (its revision) the working variant, with a
    solver that lands the variant in the band: the replay servers, the round, its lines and the
    status snapshot after it."""
    s, g = one_turn_solve(SEED), GIVE_UP_ONE
    config = FlywheelConfig(generation_mode="prompt", assignments_per_round=1, solver_max_turns=1,
                            proposals_per_assignment=1)
    lines: list[str] = []
    with ReplayServer([first, _variant_reply()]) as proposer, routed_replay([s, g, s, g], REVIEW_OK) as solver:
        settings = dataclasses.replace(fresh_nats, model_url=solver.url, model="replay",
                                       proposer_model_url=proposer.url, proposer_model="replay")
        store = PoolStore(await bus.kv(BUCKET))
        await seed_pool(bus, store, [SEED])
        await register_heldout(bus)

        async def size() -> int:
            return len((await store.index()).active)

        async with running(settings, *all_services(config)):
            [r1] = await run_rounds(bus, size, rounds=1, fresh=1, review=False, round_timeout=600, out=lines.append)
        snap = await snapshot(bus, config)
    return proposer, solver, r1, lines, snap


async def test_a_gate_rejection_goes_back_with_its_evidence_and_the_revision_repeats_every_check(fresh_nats, bus):
    """The proposer's first candidate has a reference solution that does nothing: the validator
    rejects it and sends it back with the oracle's output; the revision (the working variant)
    passes every stage again, from the first, and calibrates into the band."""
    broken = _variant_reply(solve="#!/bin/bash\necho 'solve.sh: not implemented yet'\n")
    proposer, solver, r1, lines, snap = await _rejected_then_revised(fresh_nats, bus, broken)
    assert not solver.errors and not proposer.errors, (solver.errors, proposer.errors)
    assert r1.done and r1.finished == {"r1-000": "admitted"}, lines

    first, second = await bus.history(subjects.RESULT_CALIBRATION, CalibrationResult)
    assert (first.lineage.revision, first.decision, first.resubmitted) == (0, "rejected", True)
    assert [(v.stage, v.reason) for v in first.verdicts] == [("validate", "oracle_failed")]
    assert (second.lineage.revision, second.decision) == (1, "admitted")
    assert [v.stage for v in second.verdicts] == list(Settings().route_stages)  # every stage of the default route
    assert [v.reason for v in await bus.history(subjects.RESULT_VALIDATION, ValidationResult)] == ["oracle_failed", "ok"]
    assert any("result r1-000 rev0: validate:oracle_failed" in line and "revision 1 requested" in line for line in lines)

    # The revision's proposer saw the failed check, the oracle's own output and its previous files.
    prompt = proposer.requests[1]["messages"][1]["content"]
    assert "Check failed: validate (oracle_failed)" in prompt and "solve.sh: not implemented yet" in prompt
    assert "## Your previous candidate" in prompt and "revision 1 of a rejected candidate" in prompt

    status = snap.status
    assert (status.candidates, status.admitted, status.revised, status.rounds_per_admitted) == (2, 1, 1, 2.0)
    assert status.mean_proposer_reward == 1.0  # the revised rejection is no final failure


WEAK_TESTS = '''from pathlib import Path


def test_rollup_written():
    assert Path("/app/out/monthly_region.csv").exists()
'''


async def test_tests_that_pass_a_wrong_answer_go_back_with_it_and_the_revision_is_admitted(fresh_nats, bus):
    """The proposer's first candidate only checks that the roll-up exists: the strength gate's
    mutants of the reference's output (halved, a number moved) keep full reward, so it goes back
    naming the wrong answer the tests passed; the revision with the real tests is admitted."""
    weak = _variant_reply(tests={"tests/test_rollup.py": WEAK_TESTS})
    proposer, _, r1, lines, _ = await _rejected_then_revised(fresh_nats, bus, weak)
    assert r1.done and r1.finished == {"r1-000": "admitted"}, lines
    first, second = await bus.history(subjects.RESULT_CALIBRATION, CalibrationResult)
    assert [(v.stage, v.ok, v.reason) for v in first.verdicts] == [("validate", True, "ok"),
                                                                 ("strength", False, "weak_tests")]
    assert first.resubmitted and "/app/out/monthly_region.csv to exist but not to be right" in first.verdicts[-1].detail
    assert (second.lineage.revision, second.decision) == (1, "admitted")
    prompt = proposer.requests[1]["messages"][1]["content"]
    assert "Check failed: strength (weak_tests)" in prompt and "perturb /app/out/monthly_region.csv" in prompt
