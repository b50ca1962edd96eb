"""A small OTLP/HTTP trace receiver: where compose sends spans when no Jaeger image can be had.

``POST /v1/traces`` takes an ``ExportTraceServiceRequest`` (protobuf, as the services' OTLP
exporter sends it, plain or gzip) and keeps, per trace, the services that sent spans of it and
the episodes its spans name (``aes.episode_id``). Read back with:

- ``GET /traces``: ``{trace_id: [service names...]}``
- ``GET /episodes``: ``{episode_id: [trace ids...]}``
- ``GET /health``: ``ok`` (the compose healthcheck)

It stores no span bodies: only what answers "one trace per episode, across which services".

    python -m aes_ops.otlp_sink --host 0.0.0.0 --port 4318
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import threading
from collections import OrderedDict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

log = logging.getLogger("aes.otlp_sink")

MAX_TRACES = 100_000
"""Traces remembered; the oldest are forgotten first, so a long-running sink stays bounded."""
MAX_BODY = 64 * 1024 * 1024
"""Largest request accepted (the SDK's batches are far smaller)."""


class TraceIndex:
    """Trace id -> service names, episode id -> trace ids; thread-safe."""

    def __init__(self, max_traces: int = MAX_TRACES) -> None:
        self.max_traces = max_traces
        self._services: OrderedDict[str, set[str]] = OrderedDict()
        self._episodes: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    def add(self, request: ExportTraceServiceRequest) -> int:
        """Index every span of ``request``; returns how many there were."""
        n = 0
        with self._lock:
            for rs in request.resource_spans:
                service = next((a.value.string_value for a in rs.resource.attributes if a.key == "service.name"),
                               "unknown_service")
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        n += 1
                        trace_id = span.trace_id.hex()
                        self._services.setdefault(trace_id, set()).add(service)
                        self._services.move_to_end(trace_id)
                        for a in span.attributes:
                            if a.key == "aes.episode_id" and a.value.string_value:
                                self._episodes.setdefault(a.value.string_value, set()).add(trace_id)
            while len(self._services) > self.max_traces:
                old, _ = self._services.popitem(last=False)
                for traces in self._episodes.values():
                    traces.discard(old)
                self._episodes = {e: t for e, t in self._episodes.items() if t}
        return n

    def traces(self) -> dict[str, list[str]]:
        with self._lock:
            return {t: sorted(s) for t, s in self._services.items()}

    def episodes(self) -> dict[str, list[str]]:
        with self._lock:
            return {e: sorted(t) for e, t in self._episodes.items()}


def make_server(host: str, port: int, index: TraceIndex | None = None) -> ThreadingHTTPServer:
    """The HTTP server (not yet serving); ``server.index`` is what it has received."""
    index = index or TraceIndex()

    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, obj: object) -> None:
            self._send(status, json.dumps(obj).encode(), "application/json")

        def do_GET(self) -> None:  # noqa: N802
            path = self.path.split("?", 1)[0].rstrip("/")
            if path == "/traces":
                self._json(200, index.traces())
            elif path == "/episodes":
                self._json(200, index.episodes())
            elif path == "/health":
                self._send(200, b"ok\n", "text/plain")
            else:
                self._json(404, {"error": f"no route GET {self.path}"})

        def do_POST(self) -> None:  # noqa: N802
            if self.path.split("?", 1)[0].rstrip("/") != "/v1/traces":
                self._json(404, {"error": f"no route POST {self.path} (this sink takes traces only)"})
                return
            length = int(self.headers.get("content-length") or 0)
            if length > MAX_BODY:
                self._json(413, {"error": f"body of {length} bytes exceeds {MAX_BODY}"})
                return
            body = self.rfile.read(length)
            if "json" in (self.headers.get("content-type") or ""):
                self._json(415, {"error": "OTLP/JSON is not supported: send application/x-protobuf"})
                return
            try:
                if (self.headers.get("content-encoding") or "").lower() == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest.FromString(body)
            except (OSError, EOFError, DecodeError) as e:
                self._json(400, {"error": f"not an OTLP ExportTraceServiceRequest: {e}"})
                return
            index.add(request)
            self._send(200, ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf")

        def log_message(self, fmt: str, *args: object) -> None:
            log.debug(fmt, *args)

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    server.index = index  # type: ignore[attr-defined]
    return server


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m aes_ops.otlp_sink", description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int, default=4318, help="OTLP/HTTP's standard port")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    server = make_server(args.host, args.port)
    log.info("OTLP/HTTP trace sink on %s:%d", args.host, args.port)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
