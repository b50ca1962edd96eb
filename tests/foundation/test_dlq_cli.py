"""``aes dlq list|show|replay|purge`` as a subprocess against a real nats-server and blob store."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys

import pytest
from nats.js.api import AckPolicy, ConsumerConfig
from nats.js.errors import NotFoundError

from aes_proto import encode, subjects
from aes_proto.messages import Assignment, BlobRef, CandidateEnv, DeadLetter, Lineage

from aes_lib.bus import Backoff, Bus, dead_letter_subject, run_service
from aes_lib.config import Settings
from aes_lib.service import Context, Service

from .helpers import assignment, env_for, eventually

AES = [sys.executable, "-m", "aes_cli.main"]
JUNK = b"\x81\xa4type\xa7Nothing"
TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


async def aes(settings: Settings, *args: str) -> tuple[int, str, str]:
    p = await asyncio.create_subprocess_exec(*AES, "dlq", *args, env=env_for(settings),
                                             stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await p.communicate()
    return p.returncode or 0, out.decode(), err.decode()


async def ok(settings: Settings, *args: str) -> str:
    rc, out, err = await aes(settings, *args)
    assert rc == 0, out + err
    return out


def _letter(key: str, consumer: str, subject: str, data: bytes = b"", fault: str = "error", **kw) -> DeadLetter:
    stream = "AES_CANDIDATES" if subject.startswith("aes.candidate.") else "AES_ASSIGNMENTS"
    return DeadLetter(idempotency_key=key, episode_id=f"ep-{key}", subject=subject, stream=stream, consumer=consumer,
                      deliveries=3, fault=fault, error=f"{key} failed\nsecond line", data=data, **kw)  # type: ignore[arg-type]


@dataclasses.dataclass
class Letters:
    sent: bytes
    """The assignment behind the first letter, as its service got it."""
    big: bytes
    """The candidate whose bytes only the blob store holds."""
    ids: dict[str, int]
    """Letter key -> id (AES_DLQ sequence)."""


@pytest.fixture
async def letters(bus: Bus) -> Letters:
    sent = encode(assignment(1))
    # The original is still on the work queue, so its Nats-Msg-Id is in the duplicate window.
    await bus.js.publish(subjects.ASSIGNMENT, sent, headers={"Nats-Msg-Id": "a-1"})
    bundle = BlobRef(key="bundles/x.tar.gz", sha256="0" * 64, size=1)
    big = encode(CandidateEnv(idempotency_key="c-1", episode_id="ep-c", env_id="e" * 64, bundle=bundle,
                              lineage=Lineage(assignment_id="as-c", category="x" * 4096)))
    ref = await asyncio.to_thread(bus.blobs.put_bytes, "dlq/c-1", big)
    ids = {}
    for letter in [
        _letter("a1", "recorder", subjects.ASSIGNMENT, sent, headers={"Nats-Msg-Id": "a-1", "traceparent": TRACE}),
        _letter("c1", "validator", subjects.stage("validate"), payload=ref, fault="transient",
                headers={"Nats-Msg-Id": "c-1"}),
        _letter("junk", "recorder", subjects.ASSIGNMENT, JUNK, fault="malformed"),
    ]:
        ids[letter.idempotency_key] = (await bus.publish(dead_letter_subject(letter.consumer), letter)).seq
    return Letters(sent, big, ids)


async def _stored_ids(bus: Bus) -> set[int]:
    return {m.metadata.sequence.stream for m in await bus.stored("aes.dlq.>")}


async def _received(bus: Bus, stream: str, subject: str) -> list:
    sub = await bus.js.pull_subscribe(subject, durable="probe", stream=stream,
                                      config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT))
    return await sub.fetch(10, timeout=2)


async def test_list_shows_each_letter_and_counts(fresh_nats: Settings, letters: Letters) -> None:
    out = await ok(fresh_nats, "list")
    lines = out.splitlines()
    assert len(lines) == 1 + 3 + 1  # header, letters, summary
    row = next(line for line in lines if "a1 failed" in line)
    assert row.split()[0] == str(letters.ids["a1"])
    assert "recorder" in row and "ep-a1" in row and subjects.ASSIGNMENT in row and "second line" in row
    assert lines[-1] == "3 dead letters; by consumer: recorder 2, validator 1; by fault: error 1, transient 1, malformed 1"

    data = json.loads(await ok(fresh_nats, "list", "--service", "validator", "--json"))
    (only,) = data["letters"]
    assert only["id"] == letters.ids["c1"] and only["payload_key"] == "dlq/c-1" and only["size"] == len(letters.big)
    assert data["by_fault"] == {"transient": 1} and data["skipped"] == 0


async def test_show_decodes_the_message_from_the_bus_or_the_blob_store(fresh_nats: Settings, letters: Letters) -> None:
    out = await ok(fresh_nats, "show", str(letters.ids["a1"]))
    assert "a1 failed\nsecond line" in out and "header traceparent" in out
    assert "message: Assignment {" in out and '"assignment_id": "as-1"' in out

    out = await ok(fresh_nats, "show", str(letters.ids["c1"]))
    assert f"{len(letters.big)} bytes in the blob store at dlq/c-1" in out
    assert "message: CandidateEnv {" in out and '"assignment_id": "as-c"' in out

    out = await ok(fresh_nats, "show", str(letters.ids["junk"]))
    assert "not a known message" in out and "'Nothing'" in out


async def test_replay_republishes_the_original_with_a_new_msg_id_and_deletes_the_letter(
        bus: Bus, fresh_nats: Settings, letters: Letters) -> None:
    out = await ok(fresh_nats, "replay", str(letters.ids["a1"]), str(letters.ids["c1"]))
    assert f"replayed {letters.ids['a1']}: {subjects.ASSIGNMENT}" in out

    original, msg = await _received(bus, "AES_ASSIGNMENTS", subjects.ASSIGNMENT)
    assert original.headers["Nats-Msg-Id"] == "a-1" and msg.data == letters.sent
    assert msg.headers["Nats-Msg-Id"] == f"a-1:replay:{letters.ids['a1']}" and msg.headers["traceparent"] == TRACE
    (msg,) = await _received(bus, "AES_CANDIDATES", subjects.stage("validate"))
    assert msg.data == letters.big  # fetched from the blob store
    assert await _stored_ids(bus) == {letters.ids["junk"]}
    with pytest.raises(NotFoundError):
        await bus.js.get_msg("AES_DLQ", seq=letters.ids["a1"])


async def test_replay_all_of_a_service(bus: Bus, fresh_nats: Settings, letters: Letters) -> None:
    out = await ok(fresh_nats, "replay", "--all", "--service", "validator")
    assert out.startswith(f"replayed {letters.ids['c1']}:") and len(out.splitlines()) == 1
    assert len(await _received(bus, "AES_CANDIDATES", subjects.stage("validate"))) == 1
    assert await _stored_ids(bus) == {letters.ids["a1"], letters.ids["junk"]}


async def test_purge_by_id_and_all(bus: Bus, fresh_nats: Settings, letters: Letters) -> None:
    assert "purged 1 dead letters" in await ok(fresh_nats, "purge", str(letters.ids["junk"]))
    assert await _stored_ids(bus) == {letters.ids["a1"], letters.ids["c1"]}
    await bus.js.publish("aes.dlq.recorder", b"not a letter")  # undecodable: listed as skipped, purged by --all
    assert "1 undecodable messages skipped on aes.dlq.>" in await ok(fresh_nats, "list")
    assert "purged 3 dead letters" in await ok(fresh_nats, "purge", "--all")
    assert await _stored_ids(bus) == set()
    assert (await ok(fresh_nats, "list")).strip() == "no dead letters"


async def test_unknown_id_and_missing_stack_are_one_line_errors(fresh_nats: Settings, letters: Letters) -> None:
    # An unknown id is bad input; purge goes on past one (it purges the others), so it ran and failed.
    for args, code in ((["show", "999"], 2), (["replay", "999"], 2), (["purge", "999"], 1)):
        rc, out, err = await aes(fresh_nats, *args)
        assert rc == code and err.strip() == "aes dlq: no dead letter with id 999 in AES_DLQ", (args, err)
    nowhere = dataclasses.replace(fresh_nats, nats_url="nats://127.0.0.1:1")
    rc, out, err = await aes(nowhere, "list")
    assert rc == 3 and err.startswith("aes dlq: cannot reach NATS") and len(err.splitlines()) == 1
    rc, out, err = await aes(fresh_nats, "replay")
    assert rc == 2 and "give letter ids or --all" in err


class Flaky(Service[Assignment]):
    """Fails its first ``max_deliver`` deliveries (a store outage), then handles."""

    name = "flaky"
    subject = subjects.ASSIGNMENT
    message_type = Assignment
    max_deliver = 2

    def __init__(self) -> None:
        self.calls = 0
        self.handled: list[str] = []

    async def handle(self, msg: Assignment, ctx: Context) -> None:
        self.calls += 1
        if self.calls <= self.max_deliver:
            raise RuntimeError("store down")
        self.handled.append(msg.idempotency_key)


async def test_a_replayed_dead_letter_is_handled_by_its_service(bus: Bus, fresh_nats: Settings) -> None:
    svc, stop = Flaky(), asyncio.Event()
    task = asyncio.create_task(run_service(svc, fresh_nats, stop=stop, backoff=Backoff(first=0.05, cap=0.2)))
    try:
        await bus.publish(subjects.ASSIGNMENT, assignment(5))
        await eventually(lambda: _letter_count(bus, 1), "a dead letter")
        assert not svc.handled
        out = await ok(fresh_nats, "replay", "--all")
        assert "replayed" in out and "for flaky, episode ep-5" in out
        await eventually(lambda: _is(svc.handled, ["a-5"]), "the replayed message to be handled")
        assert await _stored_ids(bus) == set()
    finally:
        stop.set()
        await task


async def _letter_count(bus: Bus, n: int) -> bool:
    return len(await _stored_ids(bus)) == n


async def _is(got: list[str], want: list[str]) -> bool:
    return got == want
