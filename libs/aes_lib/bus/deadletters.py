"""Dead letters in ``AES_DLQ``: read them with their ids, replay them, purge them.

A letter's id is its sequence in ``AES_DLQ``: stable, unique, and what JetStream
deletes by. Replaying publishes the original bytes on the original subject (the
consuming service gets a fresh set of deliveries), then deletes the letter.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses

from nats.js.api import PubAck
from nats.js.errors import APIError, NotFoundError

from aes_proto.codec import MessageError, decode
from aes_proto.messages import DeadLetter
from aes_proto.subjects import DEAD_LETTER_PREFIX

from aes_lib.blobstore.errors import BlobError
from aes_lib.bus.client import Bus, History
from aes_lib.bus.runner import dead_letter_subject
from aes_lib.bus.streams import stream_for

DEAD_LETTERS = f"{DEAD_LETTER_PREFIX}.>"
"""Every service's dead letters."""
STREAM = stream_for(DEAD_LETTERS)


class DeadLetterError(LookupError):
    """An id that names no dead letter, or a letter whose original bytes cannot be read."""


@dataclasses.dataclass(frozen=True)
class StoredLetter:
    id: int
    """Sequence in ``AES_DLQ``."""
    letter: DeadLetter


def letters_subject(service: str | None = None) -> str:
    """Subject of ``service``'s dead letters, or of every service's."""
    return dead_letter_subject(service) if service else DEAD_LETTERS


async def read_letters(bus: Bus, service: str | None = None) -> History[StoredLetter]:
    """Every dead letter (of ``service`` only, when given), oldest first; a record that
    does not decode is counted in ``skipped`` (``purge_all`` deletes it too)."""
    return await bus.read_back(
        letters_subject(service), lambda m: StoredLetter(m.metadata.sequence.stream, decode(m.data, DeadLetter)))


def _missing(id_: int) -> DeadLetterError:
    return DeadLetterError(f"no dead letter with id {id_} in {STREAM}")


async def get_letter(bus: Bus, id_: int) -> StoredLetter:
    try:
        raw = await bus.js.get_msg(STREAM, seq=id_)
    except NotFoundError:
        raise _missing(id_) from None
    try:
        return StoredLetter(id_, decode(raw.data or b"", DeadLetter))
    except MessageError as e:
        raise DeadLetterError(f"id {id_} in {STREAM} is no readable dead letter ({e}); purge it") from None


async def original_bytes(bus: Bus, letter: DeadLetter) -> bytes:
    """The dead message's bytes: beside the record, or in the blob store when too large."""
    if letter.payload is None:
        return letter.data
    try:
        return await asyncio.to_thread(bus.blobs.get_bytes, letter.payload)
    except BlobError as e:
        raise DeadLetterError(f"the bytes of this dead letter are gone from the blob store: {e}") from None


def _replay_headers(stored: StoredLetter) -> dict[str, str]:
    """The original headers (trace context included) with a new ``Nats-Msg-Id``: the
    original one is likely still in JetStream's duplicate window, which would drop the
    replay. The new one is fixed per letter, so a replay retried after a failed delete
    is dropped instead of delivered twice."""
    headers = dict(stored.letter.headers)
    old = headers.pop("Nats-Msg-Id", "") or stored.letter.idempotency_key
    return {**headers, "Nats-Msg-Id": f"{old}:replay:{stored.id}"}


async def replay(bus: Bus, stored: StoredLetter) -> PubAck:
    """Publish the original message again, then delete the letter (only once the
    publish is acked: a failure leaves the letter to retry)."""
    data = await original_bytes(bus, stored.letter)
    ack = await bus.js.publish(stored.letter.subject, data, headers=_replay_headers(stored))
    with contextlib.suppress(DeadLetterError):  # a concurrent replay deleted it (its publish was a duplicate)
        await purge(bus, stored.id)
    return ack


async def purge(bus: Bus, id_: int) -> None:
    try:
        await bus.js.delete_msg(STREAM, id_)
    except APIError:
        # The server answers a missing sequence with a generic delete failure: tell it apart.
        try:
            await bus.js.get_msg(STREAM, seq=id_)
        except NotFoundError:
            raise _missing(id_) from None
        raise


async def purge_all(bus: Bus, service: str | None = None) -> list[int]:
    """Delete every letter (of ``service`` only, when given), undecodable records
    included; the ids deleted. Letters arriving meanwhile are kept."""
    ids = [m.metadata.sequence.stream for m in await bus.stored(letters_subject(service))]
    for id_ in ids:
        await bus.js.delete_msg(STREAM, id_)
    return ids
