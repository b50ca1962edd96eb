"""One trace spans two processes: publisher here, handler in a worker process, consumer here again."""

from __future__ import annotations

import asyncio
import http.server
import json
import signal
import threading
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from replay_server import ReplayServer

from aes_proto import subjects
from aes_proto.messages import Assignment, GateResult, ReviewResult

from aes_lib import telemetry
from aes_lib.agents.loop import LoopLimits
from aes_lib.agents.solver import rollout
from aes_lib.blobstore import open_store
from aes_lib.bundle import Task
from aes_lib.models import ChatClient
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import ImageCache
from aes_ops.seeding import SEEDS_DIR
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



class _Collector(http.server.BaseHTTPRequestHandler):
    """Receives OTLP/HTTP trace exports, as Jaeger's collector would."""

    received: list[bytes] = []

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/v1/traces":
            _Collector.received.append(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


async def test_spans_are_exported_over_otlp_when_an_endpoint_is_set(bus: Bus, fresh_nats: Settings, tmp_path: Path) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    worker = start_worker(fresh_nats, "effect", tmp_path / "worker.log", AES_OTLP_ENDPOINT=endpoint)
    try:
        await bus.publish(subjects.ASSIGNMENT, assignment(2))
        await eventually(lambda: _has_results(bus), "the worker's result")
    finally:
        worker.send_signal(signal.SIGTERM)
        rc = await asyncio.to_thread(worker.wait, 60)
        server.shutdown()
    assert rc == 0, (tmp_path / "worker.log").read_text()
    names = []
    for body in _Collector.received:
        req = ExportTraceServiceRequest.FromString(body)
        for rs in req.resource_spans:
            service = {a.key: a.value.string_value for a in rs.resource.attributes}["service.name"]
            names += [(service, span.name) for ss in rs.scope_spans for span in ss.spans]
    assert ("worker", "worker handle") in names


async def _has_results(bus: Bus) -> bool:
    return bool(await bus.history(subjects.RESULT_GATE, GateResult))


class Planner(Service[GateResult]):
    """Handles a message of one episode and publishes the start of another, as the planner does."""

    name = "episode_planner"
    subject = subjects.RESULT_GATE
    message_type = GateResult

    async def handle(self, msg: GateResult, ctx: Context) -> None:
        await ctx.publish(subjects.ASSIGNMENT, assignment(2))  # episode "ep-2"
        await ctx.publish(subjects.RESULT_REVIEW, ReviewResult(
            idempotency_key=f"{msg.idempotency_key}:same", episode_id=msg.episode_id, env_id=msg.env_id,
            ok=True, enforced=False))


class Recorder(Service[Assignment]):
    name = "episode_recorder"
    subject = subjects.ASSIGNMENT
    message_type = Assignment

    def __init__(self) -> None:
        self.got: list[Assignment] = []

    async def handle(self, msg: Assignment, ctx: Context) -> None:
        self.got.append(msg)


async def test_each_episode_gets_its_own_trace_linked_to_its_cause(bus: Bus, fresh_nats: Settings) -> None:
    memory = InMemorySpanExporter()
    assert telemetry.setup("test", fresh_nats, exporter=memory)
    recorder, stop = Recorder(), asyncio.Event()
    services = [asyncio.create_task(run_service(s, fresh_nats, stop=stop)) for s in (Planner(), recorder)]
    try:
        with telemetry.tracer().start_as_current_span("client publish") as root:
            await bus.publish(subjects.RESULT_GATE, GateResult(idempotency_key="round:1", episode_id="round:1",
                                                               env_id="e", gate="g", ok=True, reason="ok"))
        await eventually(lambda: _nonempty(recorder.got), "the new episode's message")
    finally:
        stop.set()
        await asyncio.gather(*services)
    spans = memory.get_finished_spans()
    (planned,) = [s for s in spans if s.name == "episode_planner handle"]
    (started,) = [s for s in spans if s.name == "episode"]
    (recorded,) = [s for s in spans if s.name == "episode_recorder handle"]
    round_trace = root.get_span_context().trace_id
    assert planned.context.trace_id == round_trace  # a client's own span starts the round's trace
    assert started.context.trace_id != round_trace and started.parent is None
    assert started.attributes["aes.episode_id"] == recorder.got[0].episode_id
    assert [link.context.span_id for link in started.links] == [planned.context.span_id]
    assert recorded.context.trace_id == started.context.trace_id
    # A message of the handled episode stays in its trace: no second episode span.
    assert len([s for s in spans if s.name == "episode"]) == 1


@pytest.mark.docker
async def test_model_calls_builds_and_trials_are_spans_of_the_episode(fresh_nats: Settings, tmp_path: Path) -> None:
    memory = InMemorySpanExporter()
    assert telemetry.setup("test", fresh_nats, exporter=memory)
    with ReplayServer(["```bash\nls /app\n```", "TASK_DONE"]) as srv:
        async with ChatClient(srv.url, "replay") as client:
            with telemetry.episode("ep-spans"):
                await rollout(Task.load(SEEDS_DIR / "csv-sales-rollup"), client, ImageCache(kinds=DomainKinds()),
                              open_store(f"file://{tmp_path}/blobs"), LoopLimits(max_turns=3))
    spans = memory.get_finished_spans()
    (root,) = [s for s in spans if s.name == "episode"]
    (trial,) = [s for s in spans if s.name == "trial"]
    chats = [s for s in spans if s.name == "model chat"]
    builds = [s for s in spans if s.name == "image build"]
    assert len(chats) == 2 and builds
    assert {s.context.trace_id for s in [trial, *chats, *builds]} == {root.context.trace_id}
    assert trial.attributes["aes.reward"] == 0.0 and trial.attributes["aes.task"]
    assert all(c.attributes["gen_ai.request.model"] == "replay" and c.attributes["gen_ai.usage.output_tokens"] >= 0
               for c in chats)
    assert {b.attributes["aes.cached"] for b in builds} <= {True, False}
