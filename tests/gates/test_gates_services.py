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
    CalibrationResult, CandidateEnv, ContaminationResult, DeadLetter, GateResult, Lineage, ReviewResult,
)

from aes_lib.bus import stream_for
from aes_lib.bundle import pack
from aes_lib.contamination import KV_BUCKET, HeldoutTask, NgramIndex, load_index, register, save_index, tokens
from aes_lib.review import CRITERION_NAMES
from aes_services.contamination import ContaminationService
from aes_services.reset_gate import ResetGateService
from aes_services.review import ReviewService

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "flywheel"))
from flywheel_helpers import running, wait_for  # noqa: E402

HELDOUT = (
    "Write a bash script that rotates the nginx access logs every night, compresses the old ones "
    "with gzip and keeps exactly fourteen days of history in /var/log/nginx/archive."
)
CLEAN = "Count the lines of /app/data.txt that contain the word error and print the count."


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


async def test_contamination_gate_rejects_a_copy_and_forwards_the_rest(fresh_nats, bus, tmp_path):
    blobs = bus.blobs
    route = ("contamination", "review", "calibrate")
    clean = _candidate(blobs, _task(tmp_path, "clean", CLEAN), route, "clean")
    async with running(fresh_nats, ContaminationService()), NextStage(bus, "review") as review:
        # No index registered yet: the candidate passes and the verdict says why.
        await bus.publish(subjects.stage("contamination"), clean)
        fwd = await asyncio.wait_for(review.take(), 30)
        assert fwd.route == ("review", "calibrate")
        assert fwd.verdicts[-1].stage == "contamination" and fwd.verdicts[-1].reason == "no_index"

        await register(await bus.kv(KV_BUCKET), save_index(blobs, NgramIndex.build([HeldoutTask("tb/logrotate", HELDOUT)])))
        copied = "Please " + " ".join(tokens(HELDOUT)[5:18]) + " thanks"
        dirty = _candidate(blobs, _task(tmp_path, "dirty", copied), route, "dirty")
        clean2 = msgspec.structs.replace(
            clean, idempotency_key="clean2", lineage=msgspec.structs.replace(clean.lineage, assignment_id="as-clean2"))
        await bus.publish(subjects.stage("contamination"), dirty)
        await bus.publish(subjects.stage("contamination"), clean2)

        results = await asyncio.wait_for(
            wait_for(bus, subjects.RESULT_CONTAMINATION, ContaminationResult, lambda m: len(m) >= 3), 30)
        rejected = await asyncio.wait_for(
            wait_for(bus, subjects.RESULT_CALIBRATION, CalibrationResult, lambda m: _rejections(m)), 30)
        fwd2 = await asyncio.wait_for(review.take(), 30)

    by_env = {r.idempotency_key: r for r in results}
    dirty_result = by_env["dirty:contamination"]
    assert not dirty_result.ok
    assert dirty_result.matched_ngram == " ".join(tokens(HELDOUT)[5:18])
    assert dirty_result.heldout_task == "tb/logrotate"
    assert set(_rejections(rejected)) == {"as-dirty"}
    assert _rejections(rejected)["as-dirty"].verdicts[-1].reason == "contaminated"
    assert fwd2.lineage.assignment_id == "as-clean2" and fwd2.verdicts[-1].reason == "ok"


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
    reviews = {r.idempotency_key: r for r in await bus.history(subjects.RESULT_REVIEW, ReviewResult)}
    assert "no valid review after 3 attempts" in reviews["junk:review"].error
    assert reviews["junk:review"].criteria == ()
    soft = reviews["soft:review"]
    assert not soft.ok and not soft.enforced and soft.model == "replay"
    assert [c.name for c in soft.criteria if c.outcome == "fail"] == ["typos"]
    assert reviews["hard:review"].enforced
    assert _rejections(rejected)["as-hard"].verdicts[-1].reason == "criteria_failed"


@pytest.mark.docker
async def test_reset_gate_rejects_a_build_time_stamp(fresh_nats, bus, tmp_path):
    blobs = bus.blobs
    route = ("reset", "calibrate")
    stable = _candidate(blobs, _task(tmp_path, "stable", CLEAN, "FROM aes-base:latest\nWORKDIR /app\nRUN echo 5 > /app/data.txt\n"), route, "stable")
    stamped = _candidate(blobs, _task(tmp_path, "stamped", CLEAN, "FROM aes-base:latest\nWORKDIR /app\nRUN date +%s%N > /app/data.txt\n"), route, "stamped")
    async with running(fresh_nats, ResetGateService()), NextStage(bus, "calibrate") as calibrate:
        await bus.publish(subjects.stage("reset"), stable)
        await bus.publish(subjects.stage("reset"), stamped)
        fwd = await asyncio.wait_for(calibrate.take(), 120)
        rejected = await asyncio.wait_for(
            wait_for(bus, subjects.RESULT_CALIBRATION, CalibrationResult, lambda m: _rejections(m)), 120)
        gates = await asyncio.wait_for(wait_for(bus, subjects.RESULT_GATE, GateResult, lambda m: len(m) >= 2), 30)
    assert fwd.lineage.assignment_id == "as-stable" and fwd.verdicts[-1].reason == "ok"
    verdict = _rejections(rejected)["as-stamped"].verdicts[-1]
    assert verdict.stage == "reset" and verdict.reason == "state_differs" and "/app/data.txt" in verdict.detail
    assert {g.idempotency_key: g.ok for g in gates} == {"stable:reset": True, "stamped:reset": False}


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
