"""The fault policy: classification, I/O deadlines, budgets, and what the runner does with each."""

from __future__ import annotations

import asyncio
import collections
import threading

import docker.errors
import msgspec
import pytest

from aes_proto import subjects
from aes_proto.messages import Assignment, DeadLetter

from aes_lib import faults
from aes_lib.blobstore import BlobCorruptError, BlobNotFoundError
from aes_lib.bus import Backoff, Bus, dead_letter_subject, run_service
from aes_lib.bus.health import problems, read_health
from aes_lib.config import Settings
from aes_lib.models import ModelRequestError, ModelUnavailableError
from aes_lib.service import Context, Service

from .helpers import assignment, eventually

FAST = Backoff(first=0.05, cap=0.2)


@pytest.mark.parametrize("exc", [
    BlobNotFoundError("gone"), BlobCorruptError("garbled"), ConnectionRefusedError(), TimeoutError(),
    faults.DeadlineExceeded("slow"), docker.errors.APIError("busy", response=type("R", (), {"status_code": 503})()),
    ModelUnavailableError("endpoint down after every retry"),
])
def test_infrastructure_faults_are_transient(exc: Exception) -> None:
    assert faults.classify(exc) == "transient"


def test_bugs_and_client_errors_are_not_transient() -> None:
    not_found = docker.errors.NotFound("no such image", response=type("R", (), {"status_code": 404})())
    assert faults.classify(ValueError("bug")) == "error"
    assert faults.classify(not_found) == "error"
    assert faults.classify(ModelRequestError("HTTP 400")) == "error"


def test_a_wrapped_fault_keeps_its_class_but_mere_context_does_not() -> None:
    try:
        try:
            raise ConnectionResetError("peer")
        except ConnectionResetError as e:
            raise RuntimeError("read failed") from e
    except RuntimeError as wrapped:
        assert faults.classify(wrapped) == "transient"
    try:
        try:
            raise ConnectionResetError("peer")
        except ConnectionResetError:
            raise KeyError("unrelated bug")  # noqa: B904 - the point is an implicit context
    except KeyError as bug:
        assert faults.classify(bug) == "error"


async def test_a_hung_call_is_abandoned_at_its_deadline_and_counted_until_it_returns() -> None:
    release = threading.Event()
    with pytest.raises(faults.DeadlineExceeded, match="probe read: no answer within 0.2s"):
        await faults.call(release.wait, deadline=0.2, what="probe read")
    assert "probe read" in faults.STUCK.snapshot()
    release.set()
    for _ in range(50):
        if "probe read" not in faults.STUCK.snapshot():
            break
        await asyncio.sleep(0.05)
    assert "probe read" not in faults.STUCK.snapshot()
    assert await faults.call(sum, (1, 2), deadline=1, what="quick") == 3


class Flaky(Service[Assignment]):
    """Raises ``error`` on the first ``fail`` deliveries of each message, or sleeps past its budget."""

    name = "flaky"
    subject = subjects.ASSIGNMENT
    message_type = Assignment
    max_deliver = 3
    budget = 0.5

    def __init__(self, error: Exception | None = None, fail: int = 0, hang: int = 0) -> None:
        self.error, self.fail, self.hang = error, fail, hang
        self.attempts: collections.Counter[str] = collections.Counter()
        self.done: list[str] = []

    async def handle(self, msg: Assignment, ctx: Context) -> None:
        self.attempts[msg.idempotency_key] += 1
        n = self.attempts[msg.idempotency_key]
        if n <= self.hang:
            await asyncio.sleep(60)  # cancelled by the runner at the budget
        if n <= self.fail and self.error is not None:
            raise self.error
        self.done.append(msg.idempotency_key)


def _holds(predicate):
    async def check() -> bool:
        return predicate()
    return check


async def _letters(bus: Bus) -> list[DeadLetter]:
    return await bus.history(dead_letter_subject("flaky"), DeadLetter, timeout=0.3)


async def _serving(svc: Service, settings: Settings):
    stop = asyncio.Event()
    return stop, asyncio.create_task(run_service(svc, settings, stop=stop, backoff=FAST))


async def test_a_transient_fault_is_retried_then_the_work_is_done(bus: Bus, fresh_nats: Settings) -> None:
    svc = Flaky(BlobNotFoundError("store restarting"), fail=2)
    stop, task = await _serving(svc, fresh_nats)
    await bus.publish(subjects.ASSIGNMENT, assignment(1))
    await eventually(_holds(lambda: svc.done == ["a-1"]), "the third delivery to succeed")
    stop.set()
    await task
    assert svc.attempts["a-1"] == 3 and await _letters(bus) == []


async def test_retries_exhausted_dead_letter_with_the_fault_class(bus: Bus, fresh_nats: Settings) -> None:
    svc = Flaky(BlobNotFoundError("store down for good"), fail=99)
    stop, task = await _serving(svc, fresh_nats)
    await bus.publish(subjects.ASSIGNMENT, assignment(2))
    letters = await _until(bus, 1)
    stop.set()
    await task
    assert (letters[0].fault, letters[0].deliveries) == ("transient", 3)
    assert "store down for good" in letters[0].error and svc.done == []


async def test_a_delivery_past_its_budget_is_cancelled_redelivered_and_reported(bus: Bus, fresh_nats: Settings) -> None:
    svc = Flaky(hang=1)
    stop, task = await _serving(svc, fresh_nats)
    await bus.publish(subjects.ASSIGNMENT, assignment(3))
    # Without the budget the first delivery would sleep 60 s while the heartbeat kept it alive.
    await eventually(_holds(lambda: svc.done == ["a-3"]), "the redelivery after the cancelled one")
    records = [r for r in await read_health(bus) if r.service == "flaky"]
    stop.set()
    await task
    assert svc.attempts["a-3"] == 2
    assert records and records[0].overruns == 1 and records[0].last_overrun is not None
    assert records[0].last_overrun.budget == 0.5
    flagged = problems(records[0], now=records[0].updated_at)
    assert any("cancelled past the 0.5s budget" in p for p in flagged)


async def test_a_budget_can_be_set_per_service_in_settings(bus: Bus, fresh_nats: Settings) -> None:
    import dataclasses

    svc = Flaky(hang=99)
    stop, task = await _serving(svc, dataclasses.replace(fresh_nats, budgets="other=9,flaky=0.2"))
    await bus.publish(subjects.ASSIGNMENT, assignment(4))
    letters = await _until(bus, 1)
    stop.set()
    await task
    assert letters[0].fault == "deadline" and "0.2s budget" in letters[0].error


def test_a_malformed_budget_setting_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="AES_BUDGETS: expected name=seconds"):
        Settings(budgets="validator=soon").budget("validator", 60)


async def test_a_message_near_the_size_limit_is_dead_lettered_through_the_blob_store(
        bus: Bus, fresh_nats: Settings) -> None:
    svc = Flaky()
    stop, task = await _serving(svc, fresh_nats)
    big = b"\xc1" + bytes(bus.nc.max_payload - 512)  # 0xc1 is never valid msgpack
    await bus.js.publish(subjects.ASSIGNMENT, big)
    letters = await _until(bus, 1)
    stop.set()
    await task
    letter = letters[0]
    assert letter.fault == "malformed" and letter.data == b"" and letter.payload is not None
    assert bus.blobs.get_bytes(letter.payload) == big
    assert letter.source_sequence > 0 and len(msgspec.msgpack.encode(letter)) < 4096


async def _until(bus: Bus, n: int, timeout: float = 30.0) -> list[DeadLetter]:
    async with asyncio.timeout(timeout):
        while len(letters := await _letters(bus)) < n:
            await asyncio.sleep(0.1)
    return letters


class SlowBeat(Flaky):
    """Heartbeats every 0.3 s (ack_wait / 3) and a budget three beats long: the budget's deadline
    is armed by the heartbeat timer, not at the start."""

    ack_wait = 0.9
    max_deliver = 1


async def test_a_budget_longer_than_a_heartbeat_still_cancels_at_its_end(bus: Bus, fresh_nats: Settings) -> None:
    import dataclasses

    svc = SlowBeat(hang=99)
    stop, task = await _serving(svc, dataclasses.replace(fresh_nats, budgets="flaky=1"))
    await bus.publish(subjects.ASSIGNMENT, assignment(5))
    letters = await _until(bus, 1)  # the handler sleeps 60 s: only the budget ends it
    stop.set()
    await task
    assert letters[0].fault == "deadline" and "1s budget" in letters[0].error
    assert svc.attempts["a-5"] == 1 and svc.done == []
