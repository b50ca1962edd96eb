"""One bounded compare-and-set for every read-modify-write of a KV record."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import msgspec
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from aes_lib.bus.errors import BusError

T = TypeVar("T")

MAX_ATTEMPTS = 64
"""Re-reads of one key before giving up (the caller's message is then redelivered)."""


class ContentionError(BusError):
    """The key changed under every one of ``MAX_ATTEMPTS`` updates."""


async def read(kv: KeyValue, key: str, type_: type[T]) -> T | None:
    """The record under ``key``, or None."""
    try:
        entry = await kv.get(key)
    except KeyNotFoundError:
        return None
    return msgspec.msgpack.decode(entry.value or b"", type=type_)


async def update(kv: KeyValue, key: str, type_: type[T], change: Callable[[T | None], T | None],
                 attempts: int = MAX_ATTEMPTS) -> T | None:
    """Apply ``change`` to the record under ``key`` (None when absent) and write the result
    only if no one wrote in between, re-reading and re-applying otherwise. ``change``
    returning None or an equal record writes nothing. Returns the record now stored."""
    for _ in range(attempts):
        try:
            entry = await kv.get(key)
            old, rev = msgspec.msgpack.decode(entry.value or b"", type=type_), entry.revision
        except KeyNotFoundError:
            old, rev = None, 0
        new = change(old)
        if new is None or new == old:
            return old
        data = msgspec.msgpack.encode(new)
        try:
            if rev == 0:
                await kv.create(key, data)
            else:
                await kv.update(key, data, last=rev)
            return new
        except KeyWrongLastSequenceError:
            continue  # another writer was first: re-read and re-apply
    raise ContentionError(f"KV key {key!r} changed {attempts} times during one update")
