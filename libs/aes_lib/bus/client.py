"""A connection to NATS/JetStream: publish with dedupe and trace headers, KV buckets."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

import nats
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, PubAck
from nats.js.errors import BucketNotFoundError
from nats.js.kv import KeyValue

from aes_proto.codec import MessageError, decode, encode
from aes_proto.messages import Message

from aes_lib import telemetry
from aes_lib.bus.errors import BusAuthError, BusUnavailableError
from aes_lib.bus.streams import ensure_streams, stream_for

if TYPE_CHECKING:
    from aes_lib.blobstore import BlobStore
    from aes_lib.config import Settings

M = TypeVar("M", bound=Message)
T = TypeVar("T")

log = logging.getLogger("aes.bus")

INITIAL_ATTEMPTS = 4
"""Connection attempts before ``connect`` gives up on an unreachable server."""


async def connect(settings: "Settings", name: str = "aes") -> NATS:
    """Connect with the settings' credentials; fail fast with a specific error.

    The first connection tries a few times for ~2 s and not at all after a refusal
    (a wrong password or a missing server must not hang for minutes); once
    connected, the client reconnects forever, so a server restart is survived.
    """
    try:
        nc = await nats.connect(
            servers(settings.nats_url),
            user=settings.nats_user or None,
            password=settings.nats_password or None,
            name=name,
            allow_reconnect=False,
            max_reconnect_attempts=INITIAL_ATTEMPTS,
            reconnect_time_wait=0.5,
            connect_timeout=5,
            error_cb=_ignore,
        )
    except nats.errors.Error as e:
        if "authorization" in str(e).lower():
            raise BusAuthError(f"NATS at {settings.nats_url} refused the credentials of user {settings.nats_user!r}: {e}") from e
        raise BusUnavailableError(f"cannot reach NATS at {settings.nats_url}: {e}") from e
    except OSError as e:
        raise BusUnavailableError(f"cannot reach NATS at {settings.nats_url}: {e}") from e
    # nats-py reads these options at reconnect time.
    nc.options["allow_reconnect"] = True
    nc.options["max_reconnect_attempts"] = -1
    nc.options["reconnect_time_wait"] = 2.0
    return nc


def servers(nats_url: str) -> list[str]:
    """A cluster's comma-separated URLs as the list nats-py fails over between (it would
    read the whole string as one URL)."""
    return [u.strip() for u in nats_url.split(",") if u.strip()]


async def _ignore(e: Exception) -> None:
    """Connection errors surface as exceptions from the calls that hit them."""


class History(list[T]):
    """Messages read back from a stream, and how many stored ones did not decode."""

    def __init__(self, items: Iterable[T] = (), *, subject: str = "", skipped: int = 0) -> None:
        super().__init__(items)
        self.subject = subject
        self.skipped = skipped  # stored messages left out because they did not decode


class Bus:
    """One NATS connection with JetStream; ``async with await Bus.connect(settings) as bus``."""

    def __init__(self, nc: NATS, settings: "Settings") -> None:
        self.nc = nc
        self.js = nc.jetstream()
        self.settings = settings
        self._kv: dict[str, KeyValue] = {}
        self._blobs: "BlobStore | None" = None

    @classmethod
    async def connect(cls, settings: "Settings", name: str = "aes") -> "Bus":
        bus = cls(await connect(settings, name), settings)
        await ensure_streams(bus.js, settings.stream_replicas)
        return bus

    async def publish(self, subject: str, msg: Message) -> PubAck:
        """Publish with ``Nats-Msg-Id = msg.idempotency_key`` (JetStream drops a repeat)
        and the current trace context in the headers."""
        with telemetry.episode(msg.episode_id):
            headers = telemetry.inject({"Nats-Msg-Id": msg.idempotency_key})
        return await self.js.publish(subject, encode(msg), headers=headers)

    async def kv(self, bucket: str, ttl: float | None = None) -> KeyValue:
        """A JetStream key-value bucket, created on first use (with entries expiring after
        ``ttl`` seconds, when given) with ``stream_replicas`` copies."""
        kv = self._kv.get(bucket)
        if kv is None:
            try:
                kv = await self.js.key_value(bucket)
            except BucketNotFoundError:
                kv = await self.js.create_key_value(bucket=bucket, ttl=ttl, replicas=self.settings.stream_replicas)
            self._kv[bucket] = kv
        return kv

    @property
    def blobs(self) -> "BlobStore":
        """The configured blob store, opened on first use."""
        if self._blobs is None:
            from aes_lib.blobstore import open_store

            self._blobs = open_store(self.settings.blob_location, self.settings)
        return self._blobs

    async def stored(self, subject: str, timeout: float = 1.0) -> list[Msg]:
        """Every message stored on ``subject`` so far, undecoded, oldest first (limits
        streams only: a work-queue stream hands its messages to the consuming service
        instead). ``msg.metadata.sequence.stream`` is each one's stream sequence."""
        sub = await self.js.pull_subscribe(
            subject,
            stream=stream_for(subject),
            config=ConsumerConfig(
                deliver_policy=DeliverPolicy.ALL, ack_policy=AckPolicy.NONE, inactive_threshold=30.0
            ),
        )
        out: list[Msg] = []
        try:
            if (await sub.consumer_info()).num_pending == 0:
                return out  # nothing stored: do not wait out a fetch
            while True:
                try:
                    msgs = await sub.fetch(256, timeout=timeout)
                except (nats.errors.TimeoutError, asyncio.TimeoutError):  # nats-py raises either
                    return out
                out.extend(msgs)
                if msgs[-1].metadata.num_pending == 0:
                    return out
        finally:
            await sub.unsubscribe()

    async def history(self, subject: str, type_: type[M], timeout: float = 1.0) -> History[M]:
        """Every message stored on ``subject`` that decodes as ``type_``, oldest first."""
        return await self.read_back(subject, lambda m: decode(m.data, type_), timeout)

    async def read_back(self, subject: str, convert: Callable[[Msg], T], timeout: float = 1.0) -> History[T]:
        """``convert`` applied to every message stored on ``subject``, oldest first.

        One undecodable message (garbage, another schema version) must not make every
        reader of a stream fail forever: one that ``convert`` rejects with ``MessageError``
        is skipped, counted in ``History.skipped`` and logged."""
        out: History[T] = History(subject=subject)
        for m in await self.stored(subject, timeout):
            try:
                out.append(convert(m))
            except MessageError:
                out.skipped += 1
        if out.skipped:
            log.warning("%d undecodable messages skipped on %s", out.skipped, subject)
        return out

    async def close(self) -> None:
        """Drain: finish pending acks and publishes, then close."""
        if not self.nc.is_closed:
            # A subscription read by fetch (no callback: a pull consumer) has nothing to process,
            # and nats-py never marks its queue done: draining it waits out the whole drain
            # timeout (30 s) whenever a late status message sits there.
            for sub in list(self.nc._subs.values()):
                if sub._cb is None and not sub._closed:
                    await sub.unsubscribe()
            await asyncio.shield(self.nc.drain())

    async def __aenter__(self) -> "Bus":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
