"""The three gates as services on a real bus: forward on pass, reject on fail, always report."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from pathlib import Path

import msgspec
import nats.errors
import pytest
from gate_tasks import write_task
from replay_server import ReplayServer  # a replay/fault server standing in for a model

from aes_proto import decode, subjects
from aes_proto.messages import (
    Assignment, CalibrationResult, CandidateEnv, ContaminationResult, DeadLetter, GateResult, Lineage, ReviewResult,
)

from aes_lib.bus import stream_for
from aes_lib.bundle import pack
from aes_lib.contamination import KV_BUCKET, HeldoutTask, NgramIndex, load_index, register, save_index, tokens
from aes_lib.review import CRITERION_NAMES
from aes_services.contamination import ContaminationService
from aes_services.reset_gate import ResetGateService
from aes_services.review import ReviewService

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "flywheel"))
from flywheel_helpers import drain_workqueue, running, wait_for  # noqa: E402

HELDOUT = (
    "Write a bash script that rotates the nginx access logs every night, compresses the old ones "
    "with gzip and keeps exactly fourteen days of history in /var/log/nginx/archive."
)
CLEAN = "Count the lines of /app/data.txt that contain the word error and print the count."
NEEDS_ANSWER = ("#!/bin/sh\nif test -f /app/answer.txt; then echo 1 > /logs/verifier/reward.txt\n"
                "else echo 'no /app/answer.txt'; echo 0 > /logs/verifier/reward.txt; fi\n")
"""A verifier that the gate tasks' reference solution (``true``) fails, saying why."""


class NextStage:
    """Consumes a work-queue subject as the next stage would (one consumer per subject:
    a work-queue stream allows no second one with the same filter)."""

    def __init__(self, bus, stage: str) -> None:
        self.bus, self.subject = bus, subjects.stage(stage)

    async def __aenter__(self) -> "NextStage":
        self.sub = await self.bus.js.pull_subscribe(
            self.subject, durable=f"test-{self.subject.replace('.', '-')}", stream=stream_for(self.subject))
        return self

    async def __aexit__(self, *exc) -> None:
        await self.sub.unsubscribe()

    async def take(self) -> CandidateEnv:
        while True:
            try:
                [m] = await self.sub.fetch(1, timeout=0.5)
            except nats.errors.TimeoutError:
                continue
            await m.ack()
            return decode(m.data, CandidateEnv)


def _candidate(blobs, task_dir: Path, route: tuple[str, ...], key: str) -> CandidateEnv:
    bundle = pack(task_dir)
    ref = blobs.put_content("bundles", bundle.data, suffix=".tar.gz")
    return CandidateEnv(
        idempotency_key=key, episode_id=f"ep-{key}", env_id=bundle.sha256, bundle=ref,
        lineage=Lineage(assignment_id=f"as-{key}"), route=route,
    )


def _task(tmp_path: Path, name: str, instruction: str, dockerfile: str = "FROM aes-base:latest\nWORKDIR /app\n") -> Path:
    return write_task(tmp_path, name, dockerfile, instruction)


def _rejections(msgs):
    return {m.lineage.assignment_id: m for m in msgs if m.decision == "rejected"}


def test_index_round_trips_through_the_blob_store(blob_store):
    index = NgramIndex.build([HeldoutTask("tb/logrotate", HELDOUT)])
    ref = save_index(blob_store, index)
    assert ref.key.startswith("contamination/index/sha256/") and ref.key.endswith(".bin")
    again = load_index(blob_store, ref)
    copied = " ".join(tokens(HELDOUT)[2:15])
    assert again.check(copied).heldout_id == "tb/logrotate"
    assert again.to_bytes() == index.to_bytes()


async def test_contamination_gate_fails_closed_without_an_index_unless_opted_out(fresh_nats, bus, tmp_path):
    route = ("contamination", "review", "calibrate")
    closed = _candidate(bus.blobs, _task(tmp_path, "clean", CLEAN), route, "closed")
    async with running(fresh_nats, ContaminationService()):
        await bus.publish(subjects.stage("contamination"), closed)
        [result] = await asyncio.wait_for(wait_for(bus, subjects.RESULT_CALIBRATION, CalibrationResult, bool), 30)
    verdict = result.verdicts[-1]
    assert (result.decision, verdict.reason) == ("rejected", "no_heldout_index")
    assert "aes contamination index SRC" in verdict.detail and "AES_CONTAMINATION_REQUIRED=0" in verdict.detail
    # The deployment's gap is not the proposer's fault: nothing goes back for revision.
    assert not result.resubmitted and (await bus.js.stream_info(stream_for(subjects.ASSIGNMENT))).state.messages == 0

    opted_out = msgspec.structs.replace(closed, idempotency_key="open",
                                        lineage=msgspec.structs.replace(closed.lineage, assignment_id="as-open"))
    async with running(dataclasses.replace(fresh_nats, contamination_required=False), ContaminationService()), \
            NextStage(bus, "review") as review:
        await bus.publish(subjects.stage("contamination"), opted_out)
        fwd = await asyncio.wait_for(review.take(), 30)
    assert fwd.route == ("review", "calibrate")
    assert fwd.verdicts[-1].ok and fwd.verdicts[-1].reason == "no_index" and "unchecked" in fwd.verdicts[-1].detail


async def test_health_fails_without_an_index_and_warns_when_opted_out_or_advisory(fresh_nats, bus):
    from aes_ops.stack import health

    def admission(checks):
        return {c.part: (c.ok, c.warning) for c in checks if c.part in ("contamination", "review")}

    assert admission(await health(fresh_nats)) == {"contamination": (False, False), "review": (True, True)}
    assert admission(await health(dataclasses.replace(fresh_nats, contamination_required=False))) == {
        "contamination": (True, True), "review": (True, True)}
    await register(await bus.kv(KV_BUCKET), save_index(bus.blobs, NgramIndex.build([HeldoutTask("tb/x", HELDOUT)])))
    assert admission(await health(fresh_nats)) == {"review": (True, True)}


async def test_contamination_gate_rejects_a_copy_and_forwards_the_rest(fresh_nats, bus, tmp_path):
    blobs = bus.blobs
    route = ("contamination", "review", "calibrate")
    clean = _candidate(blobs, _task(tmp_path, "clean", CLEAN), route, "clean")
    await register(await bus.kv(KV_BUCKET), save_index(blobs, NgramIndex.build([HeldoutTask("tb/logrotate", HELDOUT)])))
    async with running(fresh_nats, ContaminationService()), NextStage(bus, "review") as review:
        copied = "Please " + " ".join(tokens(HELDOUT)[5:18]) + " thanks"
        dirty = _candidate(blobs, _task(tmp_path, "dirty", copied), route, "dirty")
        await bus.publish(subjects.stage("contamination"), dirty)
        await bus.publish(subjects.stage("contamination"), clean)

        results = await asyncio.wait_for(
            wait_for(bus, subjects.RESULT_CONTAMINATION, ContaminationResult, lambda m: len(m) >= 2), 30)
        rejected = await asyncio.wait_for(
            wait_for(bus, subjects.RESULT_CALIBRATION, CalibrationResult, lambda m: _rejections(m)), 30)
        fwd = await asyncio.wait_for(review.take(), 30)
        [revision] = await drain_workqueue(bus, subjects.ASSIGNMENT, Assignment, 1)

    by_env = {r.idempotency_key: r for r in results}
    dirty_result = by_env["dirty:contamination"]
    assert not dirty_result.ok
    assert dirty_result.matched_ngram == " ".join(tokens(HELDOUT)[5:18])
    assert dirty_result.heldout_task == "tb/logrotate"
    assert set(_rejections(rejected)) == {"as-dirty"}
    assert _rejections(rejected)["as-dirty"].verdicts[-1].reason == "contaminated"
    assert _rejections(rejected)["as-dirty"].resubmitted
    # Back to the proposer with the matched 13-gram and the held-out task it came from.
    assert (revision.lineage.assignment_id, revision.lineage.revision, revision.previous_bundle) == (
        "as-dirty", 1, dirty.bundle)
    assert dirty_result.matched_ngram in revision.feedback and "tb/logrotate" in revision.feedback
    assert fwd.lineage.assignment_id == "as-clean" and fwd.verdicts[-1].reason == "ok"
    # The candidate came without its instruction: the gate read it from the bundle and passes it on.
    assert clean.instruction == "" and fwd.instruction == CLEAN


async def test_a_candidate_whose_carried_instruction_is_not_its_bundles_is_rejected(fresh_nats, bus, tmp_path):
    route = ("review", "calibrate")
    forged = msgspec.structs.replace(_candidate(bus.blobs, _task(tmp_path, "t", CLEAN), route, "forged"),
                                     instruction="Print hello.")
    with ReplayServer([]) as srv:
        async with running(dataclasses.replace(fresh_nats, model_url=srv.url, model="replay"), ReviewService()):
            await bus.publish(subjects.stage("review"), forged)
            [result] = await asyncio.wait_for(wait_for(bus, subjects.RESULT_CALIBRATION, CalibrationResult, bool), 30)
    assert srv.requests == []  # judged on nothing the bundle does not say
    assert (result.decision, result.verdicts[-1].reason) == ("rejected", "invalid_bundle")
    assert "not its bundle's" in result.verdicts[-1].detail


def _answer(**outcomes: str) -> str:
    return json.dumps({n: {"outcome": outcomes.get(n, "pass"), "reason": f"about {n}"} for n in CRITERION_NAMES})


async def test_review_gate_records_and_enforces_by_setting(fresh_nats, bus, tmp_path, monkeypatch):
    blobs = bus.blobs
    route = ("review", "reset", "calibrate")
    task = _task(tmp_path, "t", CLEAN)
    replies = ["garbage", "still garbage", "{broken", _answer(typos="fail"), _answer(typos="fail")]
    with ReplayServer(replies) as srv:
        settings = dataclasses.replace(fresh_nats, model_url=srv.url, model="replay")
        monkeypatch.setenv("AES_REVIEW_RETRIES", "2")
        async with running(settings, ReviewService()), NextStage(bus, "reset") as reset:
            # Malformed three times: reported, forwarded, and the service keeps going.
            await bus.publish(subjects.stage("review"), _candidate(blobs, task, route, "junk"))
            fwd = await asyncio.wait_for(reset.take(), 60)
            assert fwd.verdicts[-1].reason == "review_error"
            # A failed criterion with enforcement off: recorded, forwarded.
            await bus.publish(subjects.stage("review"), _candidate(blobs, task, route, "soft"))
            fwd = await asyncio.wait_for(reset.take(), 60)
            assert fwd.verdicts[-1].ok and fwd.verdicts[-1].reason == "criteria_failed"
            assert "typos: about typos" in fwd.verdicts[-1].detail
        monkeypatch.setenv("AES_REVIEW_ENFORCE", "1")
        async with running(settings, ReviewService()):
            await bus.publish(subjects.stage("review"), _candidate(blobs, task, route, "hard"))
            rejected = await asyncio.wait_for(
                wait_for(bus, subjects.RESULT_CALIBRATION, CalibrationResult, lambda m: _rejections(m)), 60)
            [revision] = await drain_workqueue(bus, subjects.ASSIGNMENT, Assignment, 1)
    assert revision.lineage.assignment_id == "as-hard" and "typos: about typos" in revision.feedback
    reviews = {r.idempotency_key: r for r in await bus.history(subjects.RESULT_REVIEW, ReviewResult)}
    assert "no valid review after 3 attempts" in reviews["junk:review"].error
    assert reviews["junk:review"].criteria == ()
    soft = reviews["soft:review"]
    assert not soft.ok and not soft.enforced and soft.model == "replay"
    assert [c.name for c in soft.criteria if c.outcome == "fail"] == ["typos"]
    assert reviews["hard:review"].enforced
    assert _rejections(rejected)["as-hard"].verdicts[-1].reason == "criteria_failed"


@pytest.mark.docker
async def test_reset_gate_rejects_a_build_time_stamp_or_an_oracle_failing_on_the_rebuild(fresh_nats, bus, tmp_path):
    blobs = bus.blobs
    route = ("reset", "calibrate")
    stable = _candidate(blobs, _task(tmp_path, "stable", CLEAN, "FROM aes-base:latest\nWORKDIR /app\nRUN echo 5 > /app/data.txt\n"), route, "stable")
    stamped = _candidate(blobs, _task(tmp_path, "stamped", CLEAN, "FROM aes-base:latest\nWORKDIR /app\nRUN date +%s%N > /app/data.txt\n"), route, "stamped")
    unsolved = _candidate(blobs, write_task(tmp_path, "unsolved", "FROM aes-base:latest\nWORKDIR /app\n", CLEAN,
                                            test_sh=NEEDS_ANSWER), route, "unsolved")
    async with running(fresh_nats, ResetGateService()), NextStage(bus, "calibrate") as calibrate:
        for c in (stable, stamped, unsolved):
            await bus.publish(subjects.stage("reset"), c)
        fwd = await asyncio.wait_for(calibrate.take(), 240)
        rejected = await asyncio.wait_for(
            wait_for(bus, subjects.RESULT_CALIBRATION, CalibrationResult, lambda m: len(_rejections(m)) >= 2), 240)
        gates = await asyncio.wait_for(wait_for(bus, subjects.RESULT_GATE, GateResult, lambda m: len(m) >= 3), 30)
        revisions = {a.lineage.assignment_id: a for a in await drain_workqueue(bus, subjects.ASSIGNMENT, Assignment, 2)}
    assert fwd.lineage.assignment_id == "as-stable" and fwd.verdicts[-1].reason == "ok"
    assert "reference solution scores 1.0 on the rebuild" in fwd.verdicts[-1].detail
    verdict = _rejections(rejected)["as-stamped"].verdicts[-1]
    assert verdict.stage == "reset" and verdict.reason == "state_differs" and "/app/data.txt" in verdict.detail
    assert "/app/data.txt (content differs)" in revisions["as-stamped"].feedback
    verdict = _rejections(rejected)["as-unsolved"].verdicts[-1]
    assert verdict.reason == "oracle_failed_after_reset" and "reference solution fails" in verdict.detail
    assert "no /app/answer.txt" in revisions["as-unsolved"].feedback  # the verifier's output, as evidence
    assert {g.idempotency_key: g.ok for g in gates} == {"stable:reset": True, "stamped:reset": False,
                                                       "unsolved:reset": False}


async def test_review_gate_waits_out_a_model_outage_instead_of_judging(fresh_nats, bus, tmp_path):
    """Six 503s outlast the client's four tries: the delivery fails as a transient fault and the
    redelivery gets the real review; no verdict, rejection or dead letter comes from the outage."""
    route = ("review", "calibrate")
    with ReplayServer([_answer()], fail_first=6) as srv:
        settings = dataclasses.replace(fresh_nats, model_url=srv.url, model="replay")
        async with running(settings, ReviewService()), NextStage(bus, "calibrate") as nxt:
            await bus.publish(subjects.stage("review"), _candidate(bus.blobs, _task(tmp_path, "t", CLEAN), route, "out"))
            fwd = await asyncio.wait_for(nxt.take(), 90)
    assert [(v.stage, v.ok, v.reason) for v in fwd.verdicts] == [("review", True, "ok")]
    [review] = await bus.history(subjects.RESULT_REVIEW, ReviewResult)
    assert review.ok and review.error == ""
    assert await bus.history(subjects.RESULT_CALIBRATION, CalibrationResult) == []
    assert await bus.history("aes.dlq.>", DeadLetter) == []


async def test_a_gate_that_reads_no_bundle_still_refuses_an_env_id_that_is_not_the_bundles(fresh_nats, bus, tmp_path):
    packed = pack(_task(tmp_path, "t", CLEAN))
    c = msgspec.structs.replace(_candidate(bus.blobs, _task(tmp_path, "t", CLEAN), ("contamination", "calibrate"), "forged"),
                                env_id="0" * 64, instruction=packed.instruction)
    async with running(dataclasses.replace(fresh_nats, contamination_required=False), ContaminationService()):
        await bus.publish(subjects.stage("contamination"), c)
        [result] = await asyncio.wait_for(wait_for(bus, subjects.RESULT_CALIBRATION, CalibrationResult, bool), 30)
    assert (result.decision, result.verdicts[-1].reason) == ("rejected", "invalid_bundle")
    assert "is not the bundle's sha256" in result.verdicts[-1].detail
