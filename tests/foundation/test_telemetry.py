"""One trace spans two processes: publisher here, handler in a worker process, consumer here again."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from aes_proto import subjects
from aes_proto.messages import GateResult

from aes_lib import telemetry
from aes_lib.bus import Bus, run_service
from aes_lib.config import Settings
from aes_lib.service import Context, Service

from .helpers import assignment, eventually, start_worker


class GateReader(Service[GateResult]):
    name = "gate_reader"
    subject = subjects.RESULT_GATE
    message_type = GateResult

    def __init__(self) -> None:
        self.got: list[GateResult] = []

    async def handle(self, msg: GateResult, ctx: Context) -> None:
        self.got.append(msg)


async def test_one_trace_spans_two_processes(bus: Bus, fresh_nats: Settings, tmp_path: Path) -> None:
    memory = InMemorySpanExporter()
    assert telemetry.setup("test", fresh_nats, exporter=memory)
    spans_file = tmp_path / "worker-spans.jsonl"
    worker = start_worker(fresh_nats, "effect", tmp_path / "worker.log", SPANS=str(spans_file))
    reader = GateReader()
    stop = asyncio.Event()
    reading = asyncio.create_task(run_service(reader, fresh_nats, stop=stop))
    try:
        with telemetry.tracer().start_as_current_span("client publish") as root:
            await bus.publish(subjects.ASSIGNMENT, assignment(1))
        await eventually(lambda: _nonempty(reader.got), "the worker's result")
    finally:
        worker.send_signal(signal.SIGTERM)
        await asyncio.to_thread(worker.wait, 60)
        stop.set()
        await reading
    trace_id = root.get_span_context().trace_id
    worker_spans = [json.loads(line) for line in spans_file.read_text().splitlines()]
    (handled,) = [s for s in worker_spans if s["name"] == "worker handle"]
    assert int(handled["context"]["trace_id"], 16) == trace_id
    assert int(handled["parent_id"], 16) == root.get_span_context().span_id
    assert handled["kind"] == "SpanKind.CONSUMER"
    (read,) = [s for s in memory.get_finished_spans() if s.name == "gate_reader handle"]
    assert read.context.trace_id == trace_id
    assert read.parent.span_id == int(handled["context"]["span_id"], 16)


async def _nonempty(xs: list) -> bool:
    return bool(xs)

