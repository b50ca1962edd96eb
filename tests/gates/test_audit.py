"""The broken-or-hard audit: answer parsing, what the auditor reads, retries, and what a label does
to the calibration decision and the proposer's feedback. The auditor is the replay server (a
recorded answer standing in for a capable model); the calibrator's Docker tests run it for real."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from replay_server import ReplayServer  # a replay server standing in for the auditor model

from aes_proto.trajectory import Trajectory, Turn

from aes_lib.flywheel.calibration import CalibrationRule
from aes_lib.flywheel.revision import AuditNote, RolloutEvidence, audited, feedback_text
from aes_lib.models import ChatClient, RetryPolicy
from aes_lib.review.audit import (PASSING, AuditParseError, AuditSettings, AuditSettingsError, attempt_text, audit_task,
                                  parse_audit)
from aes_services.calibrator import audit_verdict

DEFECT = json.dumps({"label": "defect", "reason": "tests/test_outputs.py wants /app/out.json; the instruction names /app/result.json"})


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    for d in ("environment", "tests", "solution"):
        (tmp_path / d).mkdir()
    (tmp_path / "instruction.md").write_text("Write the sum of /app/nums.txt to /app/result.json.\n")
    (tmp_path / "environment" / "Dockerfile").write_text("FROM aes-base:latest\n")
    (tmp_path / "solution" / "solve.sh").write_text("#!/bin/sh\necho 36 > /app/out.json\n")
    (tmp_path / "tests" / "test_outputs.py").write_text("def test_sum():\n    assert open('/app/out.json').read() == '36\\n'\n")
    return tmp_path


def _failed(commands: list[tuple[str, str]], verifier: str = "FAILED test_outputs.py::test_sum") -> Trajectory:
    return Trajectory(rollout_id="r", role="solver", reward=0.0, stop_reason="done", verifier_output=verifier,
                      turns=[Turn(index=i, reply="", command=c, output=o) for i, (c, o) in enumerate(commands)])


@pytest.mark.parametrize("text, label", [
    (DEFECT, "defect"),
    ('Sure.\n```json\n{"label": "Broken", "reason": "no data file"}\n```', "defect"),
    ('{"label": "HARD", "reason": "four steps, each checked"}', "hard"),
    ('{"label": "mis-specified", "reason": "the tests read a path never named"}', "defect"),
])
def test_labels_are_read_leniently(text, label):
    assert parse_audit(text)[0] == label


@pytest.mark.parametrize("text, label", [
    ('{"label": "HACK", "reason": "it wrote the header and nothing else"}', "hack"),
    ('{"label": "honest", "reason": "it computed the totals"}', "legitimate"),
])
def test_a_passing_attempt_is_labelled_legitimate_or_a_hack(text, label):
    assert parse_audit(text, PASSING)[0] == label
    with pytest.raises(AuditParseError):
        parse_audit('{"label": "defect", "reason": "x"}', PASSING)  # the other question's label


@pytest.mark.parametrize("text, error", [
    ("it is hard", "no JSON object"),
    ('{"label": "unclear", "reason": "x"}', "does not match"),
    ('{"label": "hard", "reason": "  "}', "reason is empty"),
    ('{"label": "hard", "reason": "x", "confidence": 0.9}', "does not match"),
])
def test_what_is_not_an_audit_is_named(text, error):
    with pytest.raises(AuditParseError, match=error):
        parse_audit(text)


def test_an_attempt_is_shown_from_its_end_within_its_budget():
    traj = _failed([(f"step{i}", "x" * 300) for i in range(10)])
    text = attempt_text(traj, 1200)
    assert len(text) <= 1200
    assert "step9" in text and "step0" not in text  # the last commands are kept
    assert text.index("step8") < text.index("step9")  # in the order they ran
    assert text.startswith("reward 0.00, stopped: done") and "FAILED test_outputs.py::test_sum" in text


async def test_the_auditor_reads_the_task_and_the_failed_attempts(task_dir):
    with ReplayServer([DEFECT]) as srv:
        async with ChatClient(srv.url, "auditor", retry=RetryPolicy(attempts=1)) as client:
            audit = await audit_task(task_dir, [_failed([("cat /app/nums.txt", "1\n2")])],
                                     "An attempt given the reference solution as hints scored 0.00.", client, AuditSettings())
    assert (audit.label, audit.attempts, audit.error) == ("defect", 1, "")
    assert "/app/out.json" in audit.reason and audit.model == "auditor" and audit.prompt_tokens > 0
    [req] = srv.requests
    prompt = req["messages"][-1]["content"]
    for shown in ("=== instruction.md ===", "=== tests/test_outputs.py ===", "=== solution/solve.sh ===",
                  "$ cat /app/nums.txt", "FAILED test_outputs.py::test_sum", "reference solution as hints scored 0.00"):
        assert shown in prompt
    assert req["response_format"]["json_schema"]["schema"]["properties"]["label"]["enum"] == ["defect", "hard"]


async def test_a_malformed_audit_is_retried_then_reported_without_a_label(task_dir):
    with ReplayServer(["hard, I think", '{"label": "maybe", "reason": "x"}']) as srv:
        async with ChatClient(srv.url, "auditor", retry=RetryPolicy(attempts=1)) as client:
            audit = await audit_task(task_dir, [], "", client, AuditSettings(retries=1))
    assert audit.label is None and audit.attempts == 2 and "no valid audit after 2 attempts" in audit.error
    assert "no JSON object" in srv.requests[1]["messages"][-1]["content"]
    verdict = audit_verdict(audit, enforce=True)
    assert (verdict.ok, verdict.reason) == (True, "audit_error")  # the auditor's failure is not the proposer's


def test_an_enforced_defect_asks_for_a_repair_and_earns_nothing():
    rule = CalibrationRule()
    d = rule.decide([0.0] * 4, revision=0)
    assert (d.outcome, d.direction) == ("too_hard", "easier") and d.proposer_reward > 0
    repair = audited(d, defect=True)
    assert (repair.direction, repair.proposer_reward, repair.resubmit) == ("revise", 0.0, True)
    assert audited(d, defect=False) == d
    assert audited(rule.decide([1.0] * 4, revision=0), defect=True).direction == "harder"  # only too-hard is audited
    rollouts = [RolloutEvidence(0.0, "FAILED test_outputs.py::test_sum")] * 4
    text = feedback_text(repair, rollouts, None, (0.25, 0.75), AuditNote("defect", "the tests read /app/out.json", acts=True))
    assert "broken, not hard: the tests read /app/out.json" in text and "Make the task easier" not in text
    advisory = feedback_text(d, rollouts, None, (0.25, 0.75), AuditNote("defect", "the tests read /app/out.json", acts=False))
    assert "Make the task easier" in advisory and "An audit labelled it defect" in advisory


def test_verdicts_fail_only_an_enforced_defect():
    from aes_lib.review.audit import Audit

    defect, hard = Audit(label="defect", reason="r", model="m"), Audit(label="hard", reason="r", model="m")
    assert [audit_verdict(a, e).ok for a, e in ((defect, True), (defect, False), (hard, True))] == [False, True, True]
    assert audit_verdict(defect, False).detail.startswith("recorded only")


@pytest.mark.parametrize(("passed", "enforce", "ok", "recorded"), [
    (True, True, True, False), (True, False, True, False), (False, True, False, False), (False, False, True, True)])
def test_every_gate_enforces_or_records_by_one_rule(passed, enforce, ok, recorded):
    """``aes_lib.gate.enforced``, which strength, attack, novelty and the audit share: a finding
    fails only when enforced, and an advisory one says so and keeps its reason."""
    from aes_lib.gate import enforced

    v = enforced("strength", passed, "weak_tests", "2 of 9 mutants survive", enforce, "AES_STRENGTH_ENFORCE")
    assert (v.stage, v.ok, v.reason) == ("strength", ok, "weak_tests")
    prefix = "recorded only, AES_STRENGTH_ENFORCE is off: "
    assert v.detail == (prefix if recorded else "") + "2 of 9 mutants survive"


def test_settings_refuse_impossible_numbers():
    with pytest.raises(AuditSettingsError):
        AuditSettings(max_attempts=0)
