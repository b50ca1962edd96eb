"""One undecodable message on a stream is skipped and counted, never a reader's crash:
``Bus.history``, ``aes status``, ``aes report`` and the round planner against a real bus."""


import msgspec

from aes_proto import encode, subjects
from aes_proto.messages import CalibrationResult, DeadLetter, Lineage, PoolReview, Verdict

from aes_lib.bus import History
from aes_ops.rounds import next_round

from flywheel_helpers import aes
POISON = b"\xc1 not msgpack"
NEXT_VERSION = msgspec.msgpack.encode({"type": "CalibrationResult", "schema_version": 99})
"""A message from a future contract: decodes as msgpack, not as this version's type."""


def _result(aid: str, decision: str = "admitted") -> CalibrationResult:
    return CalibrationResult(idempotency_key=aid, episode_id=aid, env_id=aid,
                             lineage=Lineage(assignment_id=aid, round=1, cost_usd=0.5), decision=decision,
                             verdicts=(Verdict(stage="validate", ok=True, reason="ok"),), mean=0.5)


def _letter(key: str, subject: str, consumer: str) -> DeadLetter:
    return DeadLetter(idempotency_key=key, episode_id=key, subject=subject, stream="X", consumer=consumer,
                      deliveries=3, error="boom", data=b"")


async def test_history_skips_and_counts_what_does_not_decode(bus):
    await bus.publish(subjects.RESULT_CALIBRATION, _result("r1-000"))
    await bus.js.publish(subjects.RESULT_CALIBRATION, POISON)
    await bus.js.publish(subjects.RESULT_CALIBRATION, NEXT_VERSION)
    await bus.publish(subjects.RESULT_CALIBRATION, _result("r1-001"))
    got = await bus.history(subjects.RESULT_CALIBRATION, CalibrationResult)
    assert isinstance(got, History) and isinstance(got, list)
    assert [r.lineage.assignment_id for r in got] == ["r1-000", "r1-001"]
    assert (got.skipped, got.subject) == (2, subjects.RESULT_CALIBRATION)
    clean = await bus.history(subjects.POOL_EVENT, CalibrationResult)
    assert clean == [] and clean.skipped == 0


async def test_status_survives_a_poison_result_and_reports_it(fresh_nats, bus):
    await bus.publish(subjects.RESULT_CALIBRATION, _result("r1-000"))
    await bus.js.publish(subjects.RESULT_CALIBRATION, POISON)
    status = await aes(fresh_nats, "status")
    assert "valid-environment rate: 1/1" in status
    assert "1 undecodable messages skipped on aes.result.calibration" in status


async def test_report_survives_poison_and_names_every_skipped_subject(fresh_nats, bus, tmp_path):
    await bus.publish(subjects.RESULT_CALIBRATION, _result("r1-000"))
    await bus.js.publish(subjects.RESULT_CALIBRATION, POISON)
    await bus.js.publish(subjects.LEARNER_STATS, POISON)
    out = await aes(fresh_nats, "report", str(tmp_path / "r.html"))
    assert "1 undecodable messages skipped on aes.result.calibration" in out
    assert "1 undecodable messages skipped on aes.learner.stats" in out
    page = (tmp_path / "r.html").read_text()
    assert "1 undecodable messages skipped on aes.learner.stats" in page and "valid-environment rate: 1/1" in page


async def test_status_counts_dead_lettered_assignments_and_candidates(fresh_nats, bus):
    await bus.publish(subjects.RESULT_CALIBRATION, _result("r1-000"))
    for key, subject, consumer in [("d1", subjects.ASSIGNMENT, "proposer"),
                                   ("d2", subjects.stage("validate"), "validator"),
                                   ("d3", subjects.ROLLOUT_SUMMARY, "planner-stats"),  # a side consumer: not counted
                                   ("d4", subjects.ROLLOUT_REQUEST, "rollouts")]:  # a training attempt's fault
        await bus.publish(f"aes.dlq.{consumer}", _letter(key, subject, consumer))
    await bus.js.publish("aes.dlq.validator", POISON)
    status = await aes(fresh_nats, "status")
    assert "dead-lettered: 2   (assignments/candidates a service gave up on: aes dlq list)" in status
    assert "training attempts dropped after faults: 1   (never scored: aes dlq list)" in status
    assert "1 undecodable messages skipped on aes.dlq.>" in status


async def test_status_counts_a_replayed_result_once(fresh_nats, bus):
    # A replay onto a limits stream stores a second copy under a new Nats-Msg-Id.
    await bus.publish(subjects.RESULT_CALIBRATION, _result("r1-000"))
    await bus.js.publish(subjects.RESULT_CALIBRATION, encode(_result("r1-000")), headers={"Nats-Msg-Id": "r1-000:replay:1"})
    await bus.publish(subjects.RESULT_CALIBRATION, _result("r1-001", "too_hard"))
    status = await aes(fresh_nats, "status")
    assert "valid-environment rate: 2/2" in status and "dead-lettered: 0" in status


async def test_next_round_reads_past_a_poison_review(bus):
    key = "round:4"
    await bus.publish(subjects.POOL_REVIEW, PoolReview(idempotency_key=key, episode_id=key, round=4))
    await bus.js.publish(subjects.POOL_REVIEW, POISON)
    assert await next_round(bus) == 5
