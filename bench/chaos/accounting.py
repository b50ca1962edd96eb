"""What became of every candidate, read off the streams: final results and dead letters per
episode (so a double that JetStream's dedupe let through still shows), and the consumers' state."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import time

import msgspec
import nats
import nats.js.errors
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from aes_proto import subjects
from aes_proto.codec import MessageError, decode
from aes_proto.messages import CalibrationResult, DeadLetter

from chaos.stack import SERVICES
from chaos.workload import Candidate


def outcome(r: CalibrationResult) -> str:
    if r.decision == "rejected":
        v = r.verdicts[-1] if r.verdicts else None
        return f"rejected@{v.stage}:{v.reason}" if v else "rejected@?"
    return f"{r.decision}@calibrate"



class Observer:
    """The harness's own connection: publishes with retries, scans streams, reads consumers."""

    def __init__(self, settings) -> None:
        self.settings = settings
        self.bus = None

    async def connect(self) -> None:
        from aes_lib.bus import Bus

        self.bus = await Bus.connect(self.settings, name="chaos")

    async def publish(self, subject: str, msg, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                await self.bus.publish(subject, msg)  # type: ignore[union-attr]
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)

    async def publish_raw(self, subject: str, data: bytes, msg_id: str, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                await self.bus.js.publish(subject, data, headers={"Nats-Msg-Id": msg_id})  # type: ignore[union-attr]
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)

    async def scan(self, subject: str) -> list[tuple[int, bytes]]:
        """(stream sequence, raw bytes) of every message stored on ``subject``."""
        from aes_lib.bus import stream_for

        js = self.bus.js  # type: ignore[union-attr]
        sub = await js.pull_subscribe(subject, stream=stream_for(subject), config=ConsumerConfig(
            deliver_policy=DeliverPolicy.ALL, ack_policy=AckPolicy.NONE, inactive_threshold=30.0))
        out: list[tuple[int, bytes]] = []
        try:
            if (await sub.consumer_info()).num_pending == 0:
                return out
            while True:
                try:
                    msgs = await sub.fetch(256, timeout=2.0)
                except (nats.errors.TimeoutError, asyncio.TimeoutError):
                    return out
                out.extend((m.metadata.sequence.stream, m.data) for m in msgs)
                if msgs[-1].metadata.num_pending == 0:
                    return out
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def consumers_idle(self) -> tuple[bool, dict[str, tuple[int, int]]]:
        """Whether every service consumer has nothing pending or unacknowledged."""
        from aes_lib.bus import stream_for
        from aes_ops.service import load_service

        state: dict[str, tuple[int, int]] = {}
        for name in SERVICES:
            cls = load_service(name)
            try:
                info = await self.bus.js.consumer_info(stream_for(cls.subject), cls.name)  # type: ignore[union-attr]
            except nats.js.errors.NotFoundError:
                state[name] = (-1, -1)
                continue
            state[name] = (info.num_pending, info.num_ack_pending)
        return all(p == 0 and a == 0 for p, a in state.values()), state


@dataclasses.dataclass
class Tally:
    results: dict[str, list[tuple[int, CalibrationResult]]]
    letters: list[tuple[int, DeadLetter | None, bytes]]
    undecodable_results: int
    intermediate: dict[str, collections.Counter]
    """Subject -> episode -> stored messages (validation/contamination/gate results)."""

    def finished(self, cands: list[Candidate]) -> int:
        eps = {c.msg.episode_id for c in cands}
        dl = {d.episode_id for _, d, _ in self.letters if d is not None}
        return sum(1 for e in eps if e in self.results or e in dl)


async def tally(obs: Observer, cands: list[Candidate], full: bool = False) -> Tally:
    results: dict[str, list[tuple[int, CalibrationResult]]] = collections.defaultdict(list)
    bad = 0
    for seq, data in await obs.scan(subjects.RESULT_CALIBRATION):
        try:
            r = decode(data, CalibrationResult)
        except MessageError:
            bad += 1
            continue
        results[r.episode_id].append((seq, r))
    letters: list[tuple[int, DeadLetter | None, bytes]] = []
    for seq, data in await obs.scan(f"{subjects.DEAD_LETTER_PREFIX}.>"):
        try:
            letters.append((seq, decode(data, DeadLetter), data))
        except MessageError:
            letters.append((seq, None, data))
    inter: dict[str, collections.Counter] = {}
    if full:
        for subj in (subjects.RESULT_VALIDATION, subjects.RESULT_CONTAMINATION, subjects.RESULT_GATE):
            c: collections.Counter = collections.Counter()
            for _, data in await obs.scan(subj):
                with contextlib.suppress(Exception):
                    c[msgspec.msgpack.decode(data).get("episode_id", "")] += 1
            inter[subj] = c
    return Tally(dict(results), letters, bad, inter)
