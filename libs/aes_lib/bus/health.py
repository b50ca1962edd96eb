"""Each replica's own account of its handling, kept in the ``aes_health`` KV bucket.

The runner counts settled deliveries, budget overruns and dead letters, and the
I/O calls still hung past their deadline (``aes_lib.faults.STUCK``); it rewrites
its record when something goes wrong and once a minute, so ``aes health`` can say
that a stage is alive but stuck, which a process check cannot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time

import msgspec
import nats.errors
from nats.js.errors import NoKeysError
from nats.js.kv import KeyValue

from aes_proto.records import HEALTH_BUCKET, Overrun, ServiceHealth

from aes_lib import faults
from aes_lib.bus.client import Bus

log = logging.getLogger("aes.bus")

REFRESH = 60.0
"""Seconds between rewrites when nothing happens; a record not rewritten for 3x this
expires (the bucket's TTL), so a killed replica's record does not linger."""


async def _bucket(bus: Bus) -> KeyValue:
    return await bus.kv(HEALTH_BUCKET, ttl=3 * REFRESH)


class HealthReporter:
    """Counts for one replica; ``publish`` writes them under its key."""

    def __init__(self, bus: Bus, service: str) -> None:
        self.bus = bus
        self.record = ServiceHealth(service=service, host=socket.gethostname(), pid=os.getpid(), updated_at=time.time())
        self.key = f"{service}.{self.record.host}-{self.record.pid}".replace("_", "-")

    def settled(self) -> None:
        self.record = msgspec.structs.replace(self.record, handled=self.record.handled + 1)

    async def overrun(self, subject: str, sequence: int, budget: float) -> None:
        last = Overrun(at=time.time(), subject=subject, sequence=sequence, budget=budget)
        self.record = msgspec.structs.replace(self.record, overruns=self.record.overruns + 1, last_overrun=last)
        await self.publish()

    async def dead_lettered(self) -> None:
        self.record = msgspec.structs.replace(self.record, dead_lettered=self.record.dead_lettered + 1)
        await self.publish()

    async def publish(self) -> None:
        self.record = msgspec.structs.replace(
            self.record, updated_at=time.time(), stuck_io=tuple(faults.STUCK.snapshot()))
        try:
            kv = await _bucket(self.bus)
            await kv.put(self.key, msgspec.msgpack.encode(self.record))
        except (nats.errors.Error, asyncio.TimeoutError) as e:  # health must never break handling
            log.warning("%s: could not write health record: %s", self.record.service, e)

    async def run(self, stop: asyncio.Event) -> None:
        """Rewrite the record every ``REFRESH`` seconds until ``stop``."""
        while not stop.is_set():
            await self.publish()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), REFRESH)

    async def remove(self) -> None:
        """A replica that stops cleanly removes its record."""
        with contextlib.suppress(nats.errors.Error, asyncio.TimeoutError):
            await (await _bucket(self.bus)).delete(self.key)


async def read_health(bus: Bus) -> list[ServiceHealth]:
    """Every replica's record (undecodable ones skipped), by key."""
    kv = await _bucket(bus)
    try:
        keys = await kv.keys()
    except NoKeysError:
        return []
    out = []
    for key in sorted(keys):
        entry = await kv.get(key)
        try:
            out.append(msgspec.msgpack.decode(entry.value or b"", type=ServiceHealth))
        except msgspec.DecodeError:
            log.warning("undecodable health record %s skipped", key)
    return out


def problems(record: ServiceHealth, now: float, window: float = 15 * 60.0) -> list[str]:
    """What ``aes health`` should flag about one replica: recent overruns, hung I/O."""
    out = []
    if record.stuck_io:
        out.append(f"{len(record.stuck_io)} I/O call(s) hung past their deadline: {'; '.join(record.stuck_io[:3])}")
    last = record.last_overrun
    if last is not None and now - last.at < window:
        out.append(f"{record.overruns} delivery(ies) cancelled past the {last.budget:g}s budget, last "
                   f"{now - last.at:.0f}s ago ({last.subject} #{last.sequence})")
    return out
