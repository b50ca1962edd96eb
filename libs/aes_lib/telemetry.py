"""OpenTelemetry setup shared by every service, and trace propagation over NATS headers.

Spans are exported over OTLP/HTTP when ``Settings.otlp_endpoint`` (``AES_OTLP_ENDPOINT``)
is set and not at all otherwise; they are made either way, and the trace context rides
along in headers, so a process without export does not break a trace between two
processes that export, and its log lines still carry the trace id.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import TYPE_CHECKING

from opentelemetry import context, propagate, trace

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

    from aes_lib.config import Settings

_exporting = False
_episode: contextvars.ContextVar[str] = contextvars.ContextVar("aes_episode", default="")
"""The episode whose message is being handled (set by the runner), or of the trace started for one."""


def setup(service_name: str, settings: "Settings", exporter: "SpanExporter | None" = None) -> bool:
    """Install the process-wide tracer provider once; returns whether spans are exported.

    The provider is installed even with nothing to export: its spans get real ids, which
    log lines carry (``aes_lib.logs``) and messages pass on, where a no-op span would only
    repeat the publisher's. ``exporter`` overrides the OTLP exporter (tests pass an in-memory
    or file exporter).
    """
    global _exporting
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
        trace.set_tracer_provider(provider)
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        _exporting = True
    elif settings.otlp_endpoint and not _exporting:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        endpoint = settings.otlp_endpoint.rstrip("/")
        if not endpoint.endswith("/v1/traces"):
            endpoint += "/v1/traces"
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
        _exporting = True
    return _exporting


def flush() -> None:
    """Export the spans still queued (a batch exporter would lose them at exit)."""
    provider = trace.get_tracer_provider()
    if hasattr(provider, "force_flush"):
        provider.force_flush()


def shutdown() -> None:
    """Flush and stop exporting (call once, before the process exits)."""
    provider = trace.get_tracer_provider()
    if hasattr(provider, "shutdown"):
        provider.shutdown()


def tracer() -> trace.Tracer:
    return trace.get_tracer("aes")


def inject(headers: dict[str, str]) -> dict[str, str]:
    """Add the current trace context (``traceparent``...) to ``headers``; returns them."""
    propagate.inject(headers)
    return headers


def extract(headers: dict[str, str] | None) -> context.Context:
    """The trace context carried by a message's headers (empty context if none)."""
    return propagate.extract(headers or {})


def handling(episode_id: str) -> contextvars.Token[str]:
    """Mark the current context as working on ``episode_id`` (the runner, per delivery)."""
    return _episode.set(episode_id)


@contextlib.contextmanager
def episode(episode_id: str) -> Iterator[None]:
    """The trace a message of ``episode_id`` is published in: the current one when it belongs
    to that episode, or was started outside any episode (a client's own span); else a new
    trace for the episode, whose root span links to the span that caused it."""
    current = trace.get_current_span().get_span_context()
    known = _episode.get()
    if current.is_valid and known in ("", episode_id):
        yield
        return
    token = _episode.set(episode_id)
    try:
        with tracer().start_as_current_span(
            "episode", context=context.Context(), links=[trace.Link(current)] if current.is_valid else [],
            attributes={"aes.episode_id": episode_id},
        ):
            yield
    finally:
        _episode.reset(token)
