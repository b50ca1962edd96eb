"""Run one ``Service``: a durable pull consumer shared by its replicas.

Per message: decode, call the handler inside a span joined to the publisher's
trace and within the service's budget, heartbeat ``in_progress`` while it runs,
ack on success, nak with backoff when it raises or overruns (the fault policy is
``aes_lib.faults``). Once a message has failed ``max_deliver`` times, or cannot be
decoded at all, it is published to ``aes.dlq.<service>`` as a ``DeadLetter`` saying
which fault ended it, and acked. A replica that dies mid-message stops
heartbeating; after ``ack_wait`` JetStream hands the message to another replica.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import logging
import signal
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec
import nats
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import ServiceUnavailableError
from opentelemetry.trace import SpanKind, Status, StatusCode

from aes_proto.codec import MessageError, decode, encode
from aes_proto.messages import DeadLetter, Lineage
from aes_proto.subjects import DEAD_LETTER_PREFIX

from aes_lib import faults, logs, telemetry
from aes_lib.bus.client import Bus
from aes_lib.bus.health import HealthReporter
from aes_lib.bus.streams import stream_for
from aes_lib.service import Service

if TYPE_CHECKING:
    from aes_lib.config import Settings

log = logging.getLogger("aes.bus")

FETCH_WAIT = 1.0
"""Seconds one fetch waits for work; bounds how long a stop request goes unnoticed."""
ENVELOPE = 4096
"""Bytes a ``DeadLetter`` adds around the message it carries (headers, error, ids):
a message that leaves less than this under the server's max payload goes to the blob store."""
MAX_ERROR = 2000
"""Characters of an error kept in a dead letter."""


@dataclasses.dataclass(frozen=True)
class Backoff:
    """Delay before redelivering a message whose handler raised: first * 2**(n-1), capped."""

    first: float = 1.0
    """Seconds before the second delivery."""
    cap: float = 60.0
    """Longest delay between deliveries."""

    def delay(self, deliveries: int) -> float:
        return min(self.first * 2 ** max(deliveries - 1, 0), self.cap)


def dead_letter_subject(service_name: str) -> str:
    return f"{DEAD_LETTER_PREFIX}.{service_name}"


def consumer_config(service: Service) -> ConsumerConfig:
    # One delivery beyond max_deliver lets the runner see a message whose handler
    # never answered (process killed, ack_wait exceeded) and dead-letter it,
    # instead of JetStream silently giving up on it.
    return ConsumerConfig(
        durable_name=service.name,
        filter_subject=service.subject,
        ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL,
        ack_wait=service.ack_wait,
        max_deliver=service.max_deliver + 1,
        max_ack_pending=max(1000, service.concurrency * 4),
        # Read by route checks (``aes_lib.admission.check_route``) for stages not built in.
        metadata={"aes.decides": "1" if service.decides else "0"},
    )


class _Runner:
    def __init__(self, service: Service, bus: Bus, backoff: Backoff, freeze_heap: bool = False) -> None:
        self.service = service
        self.freeze_heap = freeze_heap
        self.bus = bus
        self.backoff = backoff
        self.stream = stream_for(service.subject)
        self.tracer = telemetry.tracer()
        self.budget = bus.settings.budget(service.name, service.budget)
        self.health = HealthReporter(bus, service.name)

    async def run(self, stop: asyncio.Event, on_ready: Callable[[], None] | None = None) -> None:
        svc = self.service
        await self.bus.js.add_consumer(self.stream, consumer_config(svc))
        sub = await self.bus.js.pull_subscribe_bind(durable=svc.name, stream=self.stream)
        await svc.setup(self.bus)
        if self.freeze_heap:
            # In a process of its own, what exists now (modules, settings, the handler's indexes
            # and models) lives as long as the process: take it out of the cyclic collector's
            # full passes, which otherwise walk all of it every few thousand deliveries, pausing
            # every handler in flight for ~25 ms on a loaded 2-core machine
            # (bench/results/bus_bench.md). Reference counting still frees it as before. Not in
            # a shared process (tests, the bench's own stages): its other objects would never
            # be collected once they became cyclic garbage.
            gc.collect()
            gc.freeze()
        log.info("%s: consuming %s (stream %s), budget %gs per delivery", svc.name, svc.subject, self.stream,
                 self.budget)
        if on_ready is not None:
            on_ready()
        inflight: set[asyncio.Task[None]] = set()
        reporting = asyncio.create_task(self.health.run(stop))
        try:
            while not stop.is_set():
                free = svc.concurrency - len(inflight)
                if free <= 0:
                    await asyncio.wait(inflight, return_when=asyncio.FIRST_COMPLETED)
                    continue
                try:
                    msgs = await sub.fetch(free, timeout=FETCH_WAIT)
                except (nats.errors.TimeoutError, asyncio.TimeoutError):  # nats-py raises either
                    continue
                except (ServiceUnavailableError, nats.errors.NoRespondersError) as e:
                    # A cluster electing the stream's new leader answers 503 for a few seconds.
                    log.warning("%s: JetStream unavailable, retrying: %r", svc.name, e)
                    await asyncio.sleep(FETCH_WAIT)
                    continue
                for m in msgs:
                    task = asyncio.create_task(self.guarded(m))
                    inflight.add(task)
                    task.add_done_callback(inflight.discard)
        finally:
            # Graceful drain: let in-flight handlers finish and ack before leaving.
            if inflight:
                await asyncio.gather(*inflight, return_exceptions=True)
            reporting.cancel()
            await svc.teardown()
            await self.health.remove()
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def guarded(self, msg: Msg) -> None:
        try:
            await self.handle(msg)
        except Exception:
            # The bus itself failed (e.g. the dead-letter publish): the message stays
            # unacked and comes back after ack_wait.
            log.exception("%s: could not settle %s", self.service.name, msg.subject)

    async def handle(self, msg: Msg) -> None:
        svc = self.service
        deliveries = msg.metadata.num_delivered
        with self.tracer.start_as_current_span(
            f"{svc.name} handle",
            context=telemetry.extract(msg.headers),
            kind=SpanKind.CONSUMER,
            attributes={
                "messaging.system": "nats",
                "messaging.destination.name": msg.subject,
                "messaging.consumer.group.name": svc.name,
                "aes.deliveries": deliveries,
            },
        ) as span:
            if deliveries > svc.max_deliver:
                await self.dead_letter(
                    msg, "unacked", f"no ack after {deliveries - 1} deliveries: the handler's process died each time"
                )
                return
            try:
                decoded = decode(msg.data, svc.message_type)
            except MessageError as e:
                span.set_status(Status(StatusCode.ERROR, str(e)))
                await self.dead_letter(msg, "malformed", str(e))  # redelivery cannot fix a malformed message
                return
            telemetry.handling(decoded.episode_id)  # this delivery's task only: contextvars are per task
            watch = _Watch(msg, svc.ack_wait / 3, self.budget)  # heartbeats, and arms the budget
            try:
                async with asyncio.timeout(watch.arm_now) as deadline:
                    watch.deadline = deadline
                    try:
                        await svc.handle(decoded, self.bus)
                    finally:
                        watch.deadline = None
            except Exception as e:
                if isinstance(e, TimeoutError) and deadline.expired():
                    fault = "deadline"
                    error = f"cancelled after its {self.budget:g}s budget"
                    await self.health.overrun(msg.subject, msg.metadata.sequence.stream, self.budget)
                else:
                    fault, error = faults.classify(e), "".join(traceback.format_exception_only(e)).strip()
                span.record_exception(e)
                span.set_status(Status(StatusCode.ERROR, f"{fault}: {error}"))
                log.warning("delivery failed", exc_info=fault == "error", extra={
                    "subject": msg.subject, "delivery": deliveries, "max_deliver": svc.max_deliver, "fault": fault,
                    "error": error})
                if deliveries >= svc.max_deliver:
                    await self.dead_letter(msg, fault, error)
                else:
                    await msg.nak(delay=self.backoff.delay(deliveries))
                    self.health.settled()
                    await self.health.publish()  # e.g. an I/O call now hung past its deadline
                return
            finally:
                watch.stop()
            await msg.ack()
            self.health.settled()

    async def dead_letter(self, msg: Msg, fault: str, error: str) -> None:
        md = msg.metadata
        episode_id, lineage = _provenance(msg.data)
        letter = DeadLetter(
            # Per consumer: two services reading one limits stream may both give up on a message.
            idempotency_key=f"dlq:{self.service.name}:{self.stream}:{md.sequence.stream}",
            episode_id=episode_id,
            lineage=lineage,
            subject=msg.subject,
            stream=self.stream,
            consumer=self.service.name,
            deliveries=md.num_delivered,
            fault=fault,  # type: ignore[arg-type]  # one of DeadLetter.fault's literals
            error=error[:MAX_ERROR],
            data=msg.data,
            headers={k: v for k, v in (msg.headers or {}).items()},
            source_sequence=md.sequence.stream,
        )
        if len(encode(letter)) > self.bus.nc.max_payload - ENVELOPE:
            # Too big to copy onto the bus beside its envelope: keep the bytes in the store.
            ref = await faults.call(self.bus.blobs.put_content, "dead-letters", msg.data, ".msgpack",
                                    deadline=self.bus.settings.io_deadline, what="dead-letter payload write")
            letter = msgspec.structs.replace(letter, data=b"", payload=ref)
        await self.bus.publish(dead_letter_subject(self.service.name), letter)
        log.error("dead-lettered", extra={"subject": msg.subject, "deliveries": md.num_delivered, "fault": fault,
                                          "error": error, "episode_id": episode_id})
        await msg.ack()  # handled, by dead-lettering
        await self.health.dead_lettered()


class _Watch:
    """One delivery's timer: an in-progress ack every ``beat`` seconds until ``stop``, and the
    budget's deadline, armed on the delivery's ``asyncio.timeout`` once it falls before the
    next beat (or at once, if it ends before the first).

    Almost every handler finishes long before its first heartbeat is due: a heartbeat task
    per delivery (created, started, cancelled) plus a budget timer on the timeout cost
    4-6 us more CPU per delivery than this one ``call_later`` and its cancel, about a tenth
    of the runner's own cost per delivery (bench/results/bus_bench.md). The guarantees are
    the ones they gave: heartbeats from ``beat`` seconds on, until the delivery is settled or
    the connection fails, and cancellation exactly at the budget's end."""

    __slots__ = ("loop", "msg", "beat", "end", "arm_now", "deadline", "timer", "sending", "lost")

    def __init__(self, msg: Msg, beat: float, budget: float) -> None:
        self.loop = asyncio.get_running_loop()
        self.msg, self.beat, self.end = msg, beat, self.loop.time() + budget
        self.arm_now: float | None = budget if budget <= beat else None
        """The delay for ``asyncio.timeout``: the budget, when it ends before the first beat."""
        self.deadline: asyncio.Timeout | None = None
        """The handler's timeout while it runs (set and cleared by the runner)."""
        self.sending: asyncio.Task[None] | None = None
        self.lost = False
        self.timer: asyncio.TimerHandle | None = self.loop.call_later(beat, self._due)

    def _due(self) -> None:
        if self.timer is None:  # stopped
            return
        self.timer = self.loop.call_later(self.beat, self._due)
        deadline = self.deadline
        if deadline is not None and deadline.when() is None and self.end - self.loop.time() <= self.beat:
            deadline.reschedule(self.end)  # the budget ends before the next beat
        if not self.lost and (self.sending is None or self.sending.done()):
            self.sending = self.loop.create_task(self._progress())

    async def _progress(self) -> None:
        try:
            await self.msg.in_progress()
        except nats.errors.Error:
            # Connection lost: the message will be redelivered; the handler's
            # eventual ack fails the same way and is logged by ``guarded``.
            self.lost = True

    def stop(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.sending is not None:
            self.sending.cancel()


def _provenance(data: bytes) -> tuple[str, Lineage | None]:
    """Best-effort episode id and lineage of a message that may not decode."""
    try:
        raw = msgspec.msgpack.decode(data)
    except msgspec.DecodeError:
        return "", None
    if not isinstance(raw, dict):
        return "", None
    episode = raw.get("episode_id")
    try:
        lineage = msgspec.convert(raw["lineage"], Lineage) if "lineage" in raw else None
    except msgspec.ValidationError:
        lineage = None
    return episode if isinstance(episode, str) else "", lineage


async def serve(
    service: Service,
    bus: Bus,
    stop: asyncio.Event,
    backoff: Backoff = Backoff(),
    on_ready: Callable[[], None] | None = None,
    freeze_heap: bool = False,
) -> None:
    """Consume for ``service`` on an open bus until ``stop`` is set, then drain in-flight work.
    ``on_ready`` is called once setup is done and the consumer is bound; ``freeze_heap`` (only
    for a process of its own) exempts what setup left from the cyclic collector."""
    await _Runner(service, bus, backoff, freeze_heap).run(stop, on_ready)


async def run_service(
    service: Service,
    settings: "Settings",
    *,
    stop: asyncio.Event | None = None,
    backoff: Backoff = Backoff(),
    on_ready: Callable[[], None] | None = None,
) -> None:
    """Run ``service`` on its own connection until ``stop`` is set, or, when no event is
    given, until SIGTERM/SIGINT; in-flight messages finish and are acked first."""
    logs.setup(service.name, settings)
    telemetry.setup(service.name, settings)
    loop = asyncio.get_running_loop()
    signals: list[signal.Signals] = []
    if stop is None:
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
            signals.append(sig)
    bus = await Bus.connect(settings, name=service.name)
    try:
        # Without a stop event the service owns the process (its signals, so its heap too).
        await serve(service, bus, stop, backoff, on_ready, freeze_heap=bool(signals))
    finally:
        try:
            await bus.close()
        except (nats.errors.Error, asyncio.TimeoutError) as e:
            # e.g. the server restarted while draining: unacked work is redelivered anyway.
            log.warning("%s: connection closed uncleanly: %s", service.name, e)
        await asyncio.to_thread(telemetry.flush)
        for sig in signals:
            loop.remove_signal_handler(sig)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """The event loop a service process runs on: uvloop's where it is installed (in the bench a
    five-stage chain of services used 0.86-0.93x the CPU per message, quiet and loaded, and the
    same chain in raw nats-py moved 1.21-1.25x the messages, bench/results/bus_bench.md), else
    asyncio's."""
    try:
        import uvloop
    except ImportError:  # e.g. on Windows, which uvloop does not support
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()
