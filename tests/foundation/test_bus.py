"""The bus against a real nats-server: work sharing, redelivery, dead letter, dedupe, drain."""

from __future__ import annotations

import asyncio
import collections
import signal
from pathlib import Path

import pytest

from aes_proto import encode, subjects
from aes_proto.messages import Assignment, DeadLetter, GateResult

from aes_lib.bus import Backoff, Bus, BusAuthError, BusUnavailableError, dead_letter_subject, run_service
from aes_lib.config import Settings
from aes_lib.service import Context, Service

from .helpers import assignment, eventually, start_worker

FAST = Backoff(first=0.05, cap=0.2)


class Recorder(Service[Assignment]):
    """Records each handled key; optionally fails the first ``fail`` deliveries of each."""

    name = "recorder"
    subject = subjects.ASSIGNMENT
    message_type = Assignment
    max_deliver = 3

    def __init__(self, seen: list[str], fail: int = 0, error: str = "boom") -> None:
        self.seen, self.fail, self.error = seen, fail, error
        self.attempts: collections.Counter[str] = collections.Counter()

    async def handle(self, msg: Assignment, ctx: Context) -> None:
        self.attempts[msg.idempotency_key] += 1
        if self.attempts[msg.idempotency_key] <= self.fail:
            raise RuntimeError(f"{self.error} on attempt {self.attempts[msg.idempotency_key]}")
        self.seen.append(msg.idempotency_key)


async def _pending(bus: Bus, stream: str = "AES_ASSIGNMENTS") -> int:
    return (await bus.js.stream_info(stream)).state.messages


async def test_two_replicas_split_1000_messages_none_lost_or_doubled(bus: Bus, fresh_nats: Settings) -> None:
    stop = asyncio.Event()
    seen_a: list[str] = []
    seen_b: list[str] = []
    replicas = [
        asyncio.create_task(run_service(Recorder(seen_a), fresh_nats, stop=stop, backoff=FAST)),
        asyncio.create_task(run_service(Recorder(seen_b), fresh_nats, stop=stop, backoff=FAST)),
    ]
    keys = [f"a-{i}" for i in range(1000)]
    for start in range(0, 1000, 100):
        await asyncio.gather(*(bus.publish(subjects.ASSIGNMENT, assignment(i)) for i in range(start, start + 100)))
    await eventually(lambda: _done(seen_a, seen_b, 1000), "1000 handled messages")
    await eventually(lambda: _zero(bus), "the work queue to empty")
    stop.set()
    await asyncio.gather(*replicas)
    handled = seen_a + seen_b
    assert sorted(handled) == sorted(keys)  # none lost, none doubled
    assert seen_a and seen_b, "both replicas must take part"


async def _done(a: list[str], b: list[str], n: int) -> bool:
    return len(a) + len(b) >= n


async def test_publish_deduplicates_by_idempotency_key(bus: Bus) -> None:
    first = await bus.publish(subjects.ASSIGNMENT, assignment(1))
    again = await bus.publish(subjects.ASSIGNMENT, assignment(1, category="changed"))
    assert not first.duplicate and again.duplicate
    assert await _pending(bus) == 1


async def test_failing_handler_is_retried_with_backoff_then_acked(bus: Bus, fresh_nats: Settings) -> None:
    seen: list[str] = []
    svc = Recorder(seen, fail=2)
    stop = asyncio.Event()
    task = asyncio.create_task(run_service(svc, fresh_nats, stop=stop, backoff=FAST))
    await bus.publish(subjects.ASSIGNMENT, assignment(7))
    await eventually(lambda: _nonempty(seen), "the third delivery to succeed")
    await eventually(lambda: _zero(bus), "the message to be acked")
    stop.set()
    await task
    assert svc.attempts["a-7"] == 3 and seen == ["a-7"]
    assert await bus.history(dead_letter_subject("recorder"), DeadLetter) == []


async def _nonempty(xs: list) -> bool:
    return bool(xs)


async def _zero(bus: Bus) -> bool:
    return await _pending(bus) == 0


async def test_message_that_keeps_failing_lands_in_dead_letter_with_its_error(bus: Bus, fresh_nats: Settings) -> None:
    svc = Recorder([], fail=99, error="disk on fire")
    stop = asyncio.Event()
    task = asyncio.create_task(run_service(svc, fresh_nats, stop=stop, backoff=FAST))
    sent = assignment(9)
    await bus.publish(subjects.ASSIGNMENT, sent)
    letters: list[DeadLetter] = []

    async def dead() -> bool:
        letters[:] = await bus.history(dead_letter_subject("recorder"), DeadLetter)
        return bool(letters)

    await eventually(dead, "a dead letter")
    stop.set()
    await task
    (letter,) = letters
    assert letter.deliveries == 3 and svc.attempts["a-9"] == 3
    assert "disk on fire on attempt 3" in letter.error and "RuntimeError" in letter.error
    assert letter.data == encode(sent) and letter.subject == subjects.ASSIGNMENT and letter.consumer == "recorder"
    assert letter.episode_id == "ep-9" and letter.lineage == sent.lineage
    assert await _pending(bus) == 0  # off the work queue


async def test_malformed_message_goes_straight_to_dead_letter(bus: Bus, fresh_nats: Settings) -> None:
    svc = Recorder([])
    stop = asyncio.Event()
    task = asyncio.create_task(run_service(svc, fresh_nats, stop=stop, backoff=FAST))
    await bus.js.publish(subjects.ASSIGNMENT, b"\x81\xa4type\xa7Nothing", headers={"Nats-Msg-Id": "junk"})
    letters: list[DeadLetter] = []

    async def dead() -> bool:
        letters[:] = await bus.history(dead_letter_subject("recorder"), DeadLetter)
        return bool(letters)

    await eventually(dead, "a dead letter")
    stop.set()
    await task
    (letter,) = letters
    assert letter.deliveries == 1 and not svc.attempts
    assert "cannot decode Assignment" in letter.error
    assert letter.lineage is None  # no lineage in bytes that are not a message


async def test_long_handler_heartbeats_instead_of_being_redelivered(bus: Bus, fresh_nats: Settings) -> None:
    class Slow(Recorder):
        ack_wait = 2.0

        async def handle(self, msg: Assignment, ctx: Context) -> None:
            self.attempts[msg.idempotency_key] += 1
            await asyncio.sleep(7.0)  # several ack_waits
            self.seen.append(msg.idempotency_key)

    seen: list[str] = []
    svcs = [Slow(seen), Slow(seen)]  # a second replica would take a redelivered message
    stop = asyncio.Event()
    tasks = [asyncio.create_task(run_service(s, fresh_nats, stop=stop, backoff=FAST)) for s in svcs]
    await bus.publish(subjects.ASSIGNMENT, assignment(3))
    await eventually(lambda: _nonempty(seen), "the slow handler to finish")
    await eventually(lambda: _zero(bus), "the ack")
    stop.set()
    await asyncio.gather(*tasks)
    assert sum(s.attempts["a-3"] for s in svcs) == 1


async def test_killed_consumer_message_is_redelivered_and_applied_once(bus: Bus, fresh_nats: Settings, tmp_path: Path) -> None:
    marker = tmp_path / "crashed"
    doomed = start_worker(fresh_nats, "crash", tmp_path / "doomed.log", MARKER=str(marker), WORKER_ID="doomed")
    survivor = None
    try:
        await bus.publish(subjects.ASSIGNMENT, assignment(5))
        await eventually(lambda: _exists(marker), "the worker to apply its effect")
        doomed.send_signal(signal.SIGKILL)  # after the effect, before the ack
        doomed.wait()
        survivor_marker = tmp_path / "survived"
        survivor = start_worker(fresh_nats, "crash", tmp_path / "survivor.log", MARKER=str(survivor_marker), WORKER_ID="survivor")
        await eventually(lambda: _exists(survivor_marker), "redelivery to a second worker", timeout=90)
        assert survivor_marker.read_text() == "a-5"
    finally:
        for p in (doomed, survivor):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    effects = await bus.history(subjects.RESULT_GATE, GateResult)
    assert [e.idempotency_key for e in effects] == ["a-5:gate"]  # the repeat was de-duplicated
    assert effects[0].detail == "doomed"


async def _exists(p: Path) -> bool:
    return p.exists()


async def test_sigterm_drains_the_message_in_flight(bus: Bus, fresh_nats: Settings, tmp_path: Path) -> None:
    marker = tmp_path / "started"
    proc = start_worker(fresh_nats, "slow", tmp_path / "slow.log", MARKER=str(marker), SLOW="2")
    try:
        await bus.publish(subjects.ASSIGNMENT, assignment(11))
        await eventually(lambda: _exists(marker), "the handler to start")
        proc.send_signal(signal.SIGTERM)
        rc = await asyncio.to_thread(proc.wait, 60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 0, (tmp_path / "slow.log").read_text()
    effects = await bus.history(subjects.RESULT_GATE, GateResult)
    assert [e.idempotency_key for e in effects] == ["a-11:gate"]
    assert await _pending(bus) == 0  # acked before exit: nothing left to redeliver


async def test_concurrent_handlers_after_an_idle_wait(bus: Bus, fresh_nats: Settings) -> None:
    """concurrency=4 runs four handlers at once (they only finish together), after idling."""
    barrier = asyncio.Barrier(4)

    class Wide(Recorder):
        concurrency = 4

        async def handle(self, msg: Assignment, ctx: Context) -> None:
            await asyncio.wait_for(barrier.wait(), 30)
            self.seen.append(msg.idempotency_key)

    seen: list[str] = []
    stop = asyncio.Event()
    task = asyncio.create_task(run_service(Wide(seen), fresh_nats, stop=stop))
    await asyncio.sleep(2.5)  # idle past several fetch waits first
    for i in range(4):
        await bus.publish(subjects.ASSIGNMENT, assignment(i))
    await eventually(lambda: _done(seen, [], 4), "four concurrent handlers")
    stop.set()
    await task
    assert sorted(seen) == ["a-0", "a-1", "a-2", "a-3"]


async def test_kv_bucket_is_created_on_first_use(bus: Bus) -> None:
    kv = await bus.kv("test_bucket")
    await kv.put("k", b"v")
    assert (await (await bus.kv("test_bucket")).get("k")).value == b"v"


@pytest.mark.parametrize(
    "user,password", [("", ""), ("aes", "wrong-password"), ("intruder", "x")], ids=["none", "bad-password", "bad-user"]
)
async def test_client_without_valid_credentials_is_refused(nats_server: Settings, user: str, password: str) -> None:
    import dataclasses

    with pytest.raises(BusAuthError, match="refused"):
        await Bus.connect(dataclasses.replace(nats_server, nats_user=user, nats_password=password))


async def test_unreachable_server_is_a_specific_error(nats_server: Settings) -> None:
    import dataclasses

    with pytest.raises(BusUnavailableError):
        await Bus.connect(dataclasses.replace(nats_server, nats_url="nats://127.0.0.1:1"))


async def test_history_reads_every_stored_message(bus: Bus) -> None:
    assert await bus.history(subjects.RESULT_GATE, GateResult) == []
    sent = [GateResult(idempotency_key=f"g-{i}", episode_id="e", env_id=f"env-{i}", gate="g", ok=True, reason="ok")
            for i in range(600)]
    for start in range(0, 600, 100):
        await asyncio.gather(*(bus.publish(subjects.RESULT_GATE, m) for m in sent[start:start + 100]))
    got = await bus.history(subjects.RESULT_GATE, GateResult)
    assert sorted(g.idempotency_key for g in got) == sorted(m.idempotency_key for m in sent)
    assert await bus.history(subjects.RESULT_GATE, GateResult) == got  # reading does not consume
