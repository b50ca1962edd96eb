"""The OTLP/HTTP sink compose runs where Jaeger cannot be had: the SDK's own exporter feeds it."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from aes_ops.otlp_sink import TraceIndex, make_server


@pytest.fixture
def sink() -> Iterator[str]:
    server = make_server("127.0.0.1", 0, TraceIndex(max_traces=3))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _get(url: str):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def _provider(service: str, url: str, compression: Compression) -> TracerProvider:
    p = TracerProvider(resource=Resource.create({"service.name": service}))
    p.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces", compression=compression)))
    return p


def test_spans_of_two_services_join_one_trace_per_episode(sink: str) -> None:
    planner, validator = _provider("planner", sink, Compression.NoCompression), _provider("validator", sink, Compression.Gzip)
    with planner.get_tracer("t").start_as_current_span("episode", attributes={"aes.episode_id": "r1-000"}) as root:
        with validator.get_tracer("t").start_as_current_span("validator handle"):
            pass
    trace_id = format(root.get_span_context().trace_id, "032x")
    assert _get(f"{sink}/traces") == {trace_id: ["planner", "validator"]}
    assert _get(f"{sink}/episodes") == {"r1-000": [trace_id]}


def test_it_forgets_the_oldest_traces_past_its_bound(sink: str) -> None:
    p = _provider("svc", sink, Compression.NoCompression)
    for i in range(5):
        with p.get_tracer("t").start_as_current_span("episode", attributes={"aes.episode_id": f"e{i}"}):
            pass
    assert len(_get(f"{sink}/traces")) == 3
    assert sorted(_get(f"{sink}/episodes")) == ["e2", "e3", "e4"]


def test_what_is_not_an_otlp_protobuf_is_refused(sink: str) -> None:
    bad = urllib.request.Request(f"{sink}/v1/traces", data=b"\xff\x00garbage", method="POST",
                                 headers={"content-type": "application/x-protobuf"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(bad, timeout=5)
    assert e.value.code == 400 and "ExportTraceServiceRequest" in e.value.read().decode()
    as_json = urllib.request.Request(f"{sink}/v1/traces", data=b"{}", method="POST",
                                     headers={"content-type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(as_json, timeout=5)
    assert e.value.code == 415
    assert urllib.request.urlopen(f"{sink}/health", timeout=5).read() == b"ok\n"
