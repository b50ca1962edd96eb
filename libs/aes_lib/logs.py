"""Service logs: one line per record on stderr, readable text or JSON, with the trace id.

The bus runner calls ``setup`` when a service starts (``run_service``); ``aes`` commands
never do, so their stdout stays theirs. The embedded stack writes each service's stderr
to ``<AES_HOME>/logs/<service>.log``. A handler logs each decision once, at info, with its
facts as ``extra=`` fields (``env_id``, ``verdict``, ``reason``...): a JSON line carries them
as keys, a text line as ``key=value`` after the message. The trace id is the current
span's, so a line joins the trace of the message being handled (``aes_lib.telemetry``).
"""

from __future__ import annotations

import contextvars
import datetime
import json
import logging
import sys
from typing import TYPE_CHECKING

from opentelemetry import trace

if TYPE_CHECKING:
    from aes_lib.config import Settings

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
"""``AES_LOG_LEVEL`` values."""
FORMATS = ("text", "json")
"""``AES_LOG_FORMAT`` values."""
CHATTY = ("httpx",)
"""Libraries that log every request at info: kept to warnings and above."""

_service: contextvars.ContextVar[str] = contextvars.ContextVar("aes_service", default="")
"""Per context rather than per process: a test runs several services in one process."""
# What every record has, or gets from ``_stamp``; any other attribute came from ``extra=``.
_STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "service", "trace_id", "span_id"}


class LogSettingsError(ValueError):
    """``AES_LOG_LEVEL`` or ``AES_LOG_FORMAT`` is not one of the known values."""


def setup(service_name: str, settings: "Settings") -> None:
    """Send every record of this process to stderr at ``settings.log_level`` in
    ``settings.log_format``, labelled ``service_name`` (in the calling context, hence in the
    tasks and ``asyncio.to_thread`` calls it starts). Calling it again replaces the configuration."""
    level = LEVELS.get(settings.log_level.lower())
    if level is None:
        raise LogSettingsError(f"AES_LOG_LEVEL must be one of {', '.join(LEVELS)}, got {settings.log_level!r}")
    if settings.log_format.lower() not in FORMATS:
        raise LogSettingsError(f"AES_LOG_FORMAT must be one of {', '.join(FORMATS)}, got {settings.log_format!r}")
    _service.set(service_name)
    handler = _Stderr()
    handler.addFilter(_stamp)
    handler.setFormatter(_Json() if settings.log_format.lower() == "json" else _Text())
    root = logging.getLogger()
    for old in root.handlers[:]:  # e.g. a basicConfig handler installed before the service started
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for name in CHATTY:
        logging.getLogger(name).setLevel(max(level, logging.WARNING))


class _Stderr(logging.StreamHandler):
    """Writes to ``sys.stderr`` as it is at each record (test runners swap it)."""

    def __init__(self) -> None:
        logging.Handler.__init__(self)

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr


def _stamp(record: logging.LogRecord) -> bool:
    """Label the record with its service and the current span's ids (empty outside a span)."""
    span = trace.get_current_span().get_span_context()
    record.service = _service.get()
    record.trace_id = format(span.trace_id, "032x") if span.is_valid else ""
    record.span_id = format(span.span_id, "016x") if span.is_valid else ""
    return True


def _fields(record: logging.LogRecord) -> dict[str, object]:
    """The record's ``extra=`` fields."""
    return {k: v for k, v in vars(record).items() if k not in _STANDARD}


class _Text(logging.Formatter):
    """``2025-06-01 12:00:00,123 INFO validator [4bf92f35] gate verdict stage=validate verdict=fail ...``"""

    def format(self, record: logging.LogRecord) -> str:
        r = vars(record)  # stamped by ``_stamp``
        line = " ".join([self.formatTime(record), record.levelname, r["service"] or "-",
                         *([f"[{r['trace_id'][:8]}]"] if r["trace_id"] else []), record.getMessage(),
                         *(f"{k}={_value(v)}" for k, v in _fields(record).items())])
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _value(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    s = str(value)
    # Quoted when it would not read back as one token.
    return json.dumps(s) if not s or any(c.isspace() or c in "\"=" for c in s) else s


class _Json(logging.Formatter):
    """One JSON object per record: ts, level, service, logger, msg, trace_id, span_id, the
    ``extra=`` fields, and exc when an exception is attached."""

    def format(self, record: logging.LogRecord) -> str:
        r = vars(record)  # stamped by ``_stamp``
        out: dict[str, object] = {
            "ts": datetime.datetime.fromtimestamp(record.created, datetime.timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "service": r["service"],
            "logger": record.name,
            "msg": record.getMessage(),
            "trace_id": r["trace_id"],
            "span_id": r["span_id"],
        }
        for k, v in _fields(record).items():
            out.setdefault(k, v)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)
