"""The verifier-strength gate on a real Docker engine, NATS and blob store: wrong solutions the
tests must fail (near misses the task ships, mutants of the reference's end state)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from aes_proto import decode, subjects
from aes_proto.messages import CalibrationResult, CandidateEnv, GateResult

from aes_lib.bundle import Task
from aes_lib.bus import Bus, serve
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import ImageCache
from aes_lib.sandbox.strength import check_strength, near_misses
from aes_services.strength import StrengthGateService
from test_validator_service import candidate, docker_available, wait_for  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.docker, pytest.mark.timeout(600)]
ECHO = Path(__file__).parents[1] / "sandbox" / "tasks" / "echo"
EXISTS_ONLY = '''from pathlib import Path


def test_greeting():
    assert Path("/app/greeting.txt").exists()


def test_count():
    assert Path("/app/count.txt").exists()
'''
# Checks the count is a number, not that it is the right one: the off-by-one near miss passes.
LOOSE_COUNT = '''from pathlib import Path


def test_greeting():
    assert Path("/app/greeting.txt").read_text() == "hello, world\\n"


def test_count():
    assert Path("/app/count.txt").read_text().strip().isdigit()
'''
OFF_BY_ONE = '''#!/bin/bash
# wrong: counts one line too many (an off-by-one on the line count)
printf 'hello, world\\n' > /app/greeting.txt
echo $(( $(wc -l < /app/input.txt) + 1 )) > /app/count.txt
'''


def variant(tmp_path: Path, name: str, tests: str | None = None, near_miss: str | None = None) -> Path:
    d = tmp_path / name
    shutil.copytree(ECHO, d)
    if tests is not None:
        (d / "tests" / "test_outputs.py").write_text(tests)
    if near_miss is not None:
        (d / "solution" / "near_miss").mkdir()
        (d / "solution" / "near_miss" / "off_by_one.sh").write_text(near_miss)
    return d


@pytest.fixture
def images(docker_available) -> ImageCache:  # noqa: F811
    return ImageCache(kinds=DomainKinds())


async def test_mutants_find_tests_that_check_only_that_outputs_exist(images, tmp_path):
    honest = await check_strength(Task.load(ECHO), images)
    assert (honest.ok, honest.reason) == (True, "ok")
    assert len(honest.mutants) == 6 and not any(t.survived for t in honest.mutants)
    assert honest.detail.startswith("6 of 6 mutants of the reference's end state killed")
    weak = await check_strength(Task.load(variant(tmp_path, "exists-only", EXISTS_ONLY)), images)
    assert (weak.ok, weak.reason) == (False, "weak_tests")
    assert "the tests need /app/count.txt, /app/greeting.txt to exist but not to be right" in weak.detail
    assert {t.what.split(" ")[0] for t in weak.mutants if t.survived} == {"truncate", "perturb"}
    assert "passed" in weak.logs  # the surviving mutant's verifier output, for the proposer
    assert weak.trials == 6 and weak.seconds > 0


async def test_a_near_miss_the_tests_pass_is_weak_and_one_they_fail_is_not(images, tmp_path):
    strong = Task.load(variant(tmp_path, "strong", near_miss=OFF_BY_ONE))
    assert [(m.script, m.wrong) for m in near_misses(strong)] == [
        ("near_miss/off_by_one.sh", "counts one line too many (an off-by-one on the line count)")]
    ok = await check_strength(strong, images)
    assert (ok.ok, ok.reason) == (True, "ok") and "1 near misses failed" in ok.detail
    assert [t.reward for t in ok.near_misses] == [0.5]
    loose = await check_strength(Task.load(variant(tmp_path, "loose", LOOSE_COUNT, OFF_BY_ONE)), images)
    assert (loose.ok, loose.reason) == (False, "weak_tests")
    assert loose.detail.startswith("a near miss scored 1: near_miss/off_by_one.sh (wrong: counts one line too many")
    # The mutants alone would not have caught it: perturbing the count to another number survives,
    # but the greeting is checked for content.
    assert any(t.survived and "count.txt" in t.what for t in loose.mutants)
    unexplained = variant(tmp_path, "unexplained", near_miss=OFF_BY_ONE.replace("# wrong:", "#"))
    found = await check_strength(Task.load(unexplained), images)
    assert (found.ok, found.reason, found.trials) == (False, "near_miss_unexplained", 0)


async def test_the_gate_rejects_weak_tests_passes_strong_ones_and_can_be_advisory(docker_available, bus: Bus,  # noqa: F811
                                                                                  tmp_path, monkeypatch):
    weak = candidate(bus, variant(tmp_path, "weak", EXISTS_ONLY), "weak", route=("strength", "contamination"))
    strong = candidate(bus, ECHO, "strong", route=("strength", "contamination"))
    forwarded = await bus.js.pull_subscribe(subjects.stage("contamination"), durable="probe", stream="AES_CANDIDATES")

    async def run(*cands: CandidateEnv) -> None:
        stop = asyncio.Event()
        runner = asyncio.create_task(serve(StrengthGateService(), bus, stop))
        try:
            for c in cands:
                await bus.publish(subjects.stage("strength"), c)
            await wait_for(bus, subjects.RESULT_GATE, GateResult, len(cands) + seen, timeout=400)
        finally:
            stop.set()
            await runner

    seen = 0
    await run(weak, strong)
    gates = {g.idempotency_key: g for g in await bus.history(subjects.RESULT_GATE, GateResult)}
    assert (gates["weak:strength"].ok, gates["weak:strength"].reason) == (False, "weak_tests")
    assert "trials" in gates["weak:strength"].detail and "container s]" in gates["weak:strength"].detail
    assert (gates["strong:strength"].ok, gates["strong:strength"].reason) == (True, "ok")
    [rejected] = await wait_for(bus, subjects.RESULT_CALIBRATION, CalibrationResult, 1)
    assert (rejected.env_id, rejected.verdicts[-1].reason) == (weak.env_id, "weak_tests")
    [went_on] = await forwarded.fetch(1, timeout=30)
    await went_on.ack()

    seen = 2
    monkeypatch.setenv("AES_STRENGTH_ENFORCE", "0")
    advisory = candidate(bus, variant(tmp_path, "weak-advisory", EXISTS_ONLY), "advisory",
                         route=("strength", "contamination"))
    await run(advisory)
    gate = {g.idempotency_key: g for g in await bus.history(subjects.RESULT_GATE, GateResult)}["advisory:strength"]
    assert (gate.ok, gate.reason) == (True, "weak_tests")
    assert gate.detail.startswith("recorded only, AES_STRENGTH_ENFORCE is off: ")
    [msg] = await forwarded.fetch(1, timeout=30)
    went = decode(msg.data, CandidateEnv)
    assert went.env_id == advisory.env_id and [(v.stage, v.ok, v.reason) for v in went.verdicts] == [
        ("strength", True, "weak_tests")]


async def test_a_task_without_a_reference_is_passed_unchecked(images, tmp_path):
    d = variant(tmp_path, "imported")
    shutil.rmtree(d / "solution")
    report = await check_strength(Task.load(d), images)
    assert (report.ok, report.reason, report.trials) == (True, "ok", 0)
    assert report.detail.startswith("no reference solution: not checked")
