"""Service logs: JSON or text lines carrying the trace id, at the level AES_LOG_LEVEL sets."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

from aes_proto import subjects
from aes_proto.messages import BlobRef, CalibrationResult, Lineage

from aes_lib import logs
from aes_lib.bus import Bus
from aes_lib.config import Settings

from .helpers import env_for, eventually

log = logging.getLogger("aes.test")
tracer = TracerProvider().get_tracer("test")
"""A real tracer of its own: its spans have ids whatever the process-wide provider is."""


@pytest.fixture
def configure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator:
    """``configure(**env)``: ``logs.setup`` from ``AES_*`` variables; the logging state is restored after."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level, logs._service.get()
    monkeypatch.setenv("AES_HOME", str(tmp_path))  # no stack.json from a running stack

    def configure(**env: str) -> None:
        for k, v in env.items():
            monkeypatch.setenv(f"AES_{k.upper()}", v)
        logs.setup("validator", Settings.from_env())

    yield configure
    root.handlers[:], level, service = saved
    root.setLevel(level)
    logs._service.set(service)


def _ids(span) -> tuple[str, str]:
    ctx = span.get_span_context()
    return format(ctx.trace_id, "032x"), format(ctx.span_id, "016x")


def test_json_lines_carry_the_trace_id_of_their_span(configure, capsys: pytest.CaptureFixture[str]) -> None:
    configure(log_format="json")
    with tracer.start_as_current_span("validator handle") as span:
        log.info("gate verdict", extra={"env_id": "e1", "verdict": "fail", "reason": "nop_passes", "nop_reward": 1.0})
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            log.exception("delivery failed")
    log.warning("outside any span")
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [line["msg"] for line in lines] == ["gate verdict", "delivery failed", "outside any span"]
    verdict, failed, outside = lines
    trace_id, span_id = _ids(span)
    assert verdict["trace_id"] == trace_id and verdict["span_id"] == span_id
    assert {k: verdict[k] for k in ("level", "service", "logger", "env_id", "verdict", "reason", "nop_reward")} == {
        "level": "info", "service": "validator", "logger": "aes.test", "env_id": "e1", "verdict": "fail",
        "reason": "nop_passes", "nop_reward": 1.0}
    assert verdict["ts"].endswith("+00:00")
    assert failed["level"] == "error" and "RuntimeError: boom" in failed["exc"]
    assert outside["trace_id"] == "" and outside["level"] == "warning"


def test_text_lines_are_one_readable_line_with_the_short_trace_id(configure, capsys: pytest.CaptureFixture[str]) -> None:
    configure(log_format="text")
    with tracer.start_as_current_span("validator handle") as span:
        log.info("gate verdict", extra={"verdict": "fail", "detail": "nop reward 1.0", "oracle_reward": 1 / 3})
    log.info("outside any span")
    inside, outside = capsys.readouterr().err.splitlines()
    assert inside.split(" ", 3)[2:] == ["INFO", f"validator [{_ids(span)[0][:8]}] gate verdict verdict=fail "
                                                'detail="nop reward 1.0" oracle_reward=0.3333']
    assert outside.endswith(" INFO validator outside any span")


def test_aes_log_level_filters(configure, capsys: pytest.CaptureFixture[str]) -> None:
    configure(log_level="warning")
    log.info("hidden")
    log.warning("shown")
    assert [line.split(" ", 4)[-1] for line in capsys.readouterr().err.splitlines()] == ["shown"]
    configure(log_level="DEBUG")
    log.debug("now shown")
    logging.getLogger("httpx").info("HTTP Request: POST /v1/chat/completions")  # one line per request: kept out
    assert [line.split(" ", 4)[-1] for line in capsys.readouterr().err.splitlines()] == ["now shown"]


@pytest.mark.parametrize(("var", "value"), [("log_level", "verbose"), ("log_format", "yaml")])
def test_a_bad_setting_is_refused_by_name(configure, var: str, value: str) -> None:
    with pytest.raises(ValueError, match=f"AES_{var.upper()}.*{value}"):
        configure(**{var: value})


async def test_a_service_logs_its_decision_with_the_publishers_trace_id(bus: Bus, fresh_nats: Settings,
                                                                        tmp_path: Path) -> None:
    """``aes service pool`` (the command the stack runs) logs the admission of a message
    published inside a span: the line carries that span's trace id and its own span."""
    ready, out, err = tmp_path / "ready", tmp_path / "stdout", tmp_path / "stderr"
    proc = subprocess.Popen([sys.executable, "-m", "aes_cli.main", "service", "pool", "--ready-file", str(ready)],
                            env=env_for(fresh_nats, AES_LOG_FORMAT="json"), stdout=out.open("wb"), stderr=err.open("wb"))
    env_id = "ab" * 32
    result = CalibrationResult(idempotency_key="cal-1", episode_id="ep-1", env_id=env_id,
                               lineage=Lineage(assignment_id="as-1"), decision="admitted", mean=0.5,
                               bundle=BlobRef(key=f"bundles/{env_id}", sha256=env_id, size=1))

    async def admitted() -> bool:
        return any('"pool admission"' in line for line in err.read_text().splitlines())

    try:
        await eventually(lambda: _exists(ready, proc), "the pool service to consume")
        with tracer.start_as_current_span("client publish") as span:
            await bus.publish(subjects.RESULT_CALIBRATION, result)
        await eventually(admitted, "the pool's log line")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    [line] = [json.loads(x) for x in err.read_text().splitlines() if '"pool admission"' in x]
    trace_id, span_id = _ids(span)
    assert line["trace_id"] == trace_id
    # The handler's own span (a child), not the publisher's repeated by a no-op span.
    assert line["span_id"] and line["span_id"] != span_id
    assert (line["service"], line["kind"], line["env_id"], line["pool_size"]) == ("pool", "admitted", env_id, 1)
    assert out.read_text() == "", "service logs go to stderr"


async def _exists(path: Path, proc: subprocess.Popen) -> bool:
    assert proc.poll() is None, "the service exited"
    return path.exists()
