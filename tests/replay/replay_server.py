"""A replay server: an OpenAI-compatible HTTP endpoint that answers each
``/v1/chat/completions`` request with the next reply of a fixed, recorded
conversation. It stands in for a model so the harness path around it is tested
with exact, known model output; everything the replies cause (commands in
containers, builds, checks, submits) runs for real.

A recording is JSON: ``{"model": "replay", "replies": ["...", ...]}``.
``fail_first`` makes the first N requests answer ``fail_status`` (retry tests).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class ReplayExhaustedError(AssertionError):
    """The harness asked for more turns than the recording holds."""


@dataclass
class ReplayServer:
    replies: list[str]
    model: str = "replay"
    fail_first: int = 0
    fail_status: int = 503
    delay_s: float = 0.0
    """Hold each answer this long (lets concurrent callers overlap)."""
    policy_version: int | None = None
    """Reported with each answer, as an engine that follows the learner does."""
    api_key: str = ""
    """When set, requests without ``Authorization: Bearer <api_key>`` get 401, as a hosted API."""
    owned_by: str = "replay"
    """What ``GET /v1/models`` says owns the model (vLLM says ``vllm``)."""
    max_model_len: int | None = None
    """Context length ``GET /v1/models`` reports, as vLLM does (None: none reported)."""
    cut: frozenset[int] = frozenset()
    """Indices of the replies answered with ``finish_reason: length``, as a reply cut at the token cap."""
    peak_in_flight: int = 0
    """Most requests being answered at once."""
    requests: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _in_flight: int = 0

    @classmethod
    def from_file(cls, path: Path, **kw: Any) -> "ReplayServer":
        rec = json.loads(path.read_text())
        return cls(replies=list(rec["replies"]), model=rec.get("model", "replay"), **kw)

    def _answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(body)
            n = len(self.requests)
            if n <= self.fail_first:
                return self.fail_status, {"error": {"message": "replay: injected failure"}}
            i = n - self.fail_first - 1
            if i >= len(self.replies):
                self.errors.append(f"request {n}: recording has only {len(self.replies)} replies")
                return 400, {"error": {"message": "replay exhausted"}}
            text = self.replies[i]
        return self.completion(body, text, i)

    def completion(self, body: dict[str, Any], text: str, i: int = 0) -> tuple[int, dict[str, Any]]:
        """The 200 answer to request ``body`` saying ``text`` (a subclass that picks replies by
        what it is asked answers with this)."""
        prompt_chars = sum(len(m.get("content", "")) for m in body.get("messages", []))
        version = {} if self.policy_version is None else {"policy_version": self.policy_version}
        return 200, {**version,
            "id": f"replay-{i}",
            "object": "chat.completion",
            "model": self.model,
            "choices": [{"index": 0, "finish_reason": "length" if i in self.cut else "stop",
                         "message": {"role": "assistant", "content": text}}],
            # Token counts approximated as chars/4: a replay has no tokenizer.
            "usage": {"prompt_tokens": prompt_chars // 4, "completion_tokens": len(text) // 4},
        }

    def __enter__(self) -> "ReplayServer":
        replay = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                if self.path.rstrip("/") == "/v1/models" and self._authorized():
                    self._send(200, {"object": "list", "data": [
                        {"id": replay.model, "object": "model", "owned_by": replay.owned_by,
                         **({} if replay.max_model_len is None else {"max_model_len": replay.max_model_len})}]})
                else:
                    self._send(404 if self._authorized() else 401, {"error": {"message": self.path}})

            def _authorized(self) -> bool:
                return not replay.api_key or self.headers.get("authorization") == f"Bearer {replay.api_key}"

            def _send(self, status: int, out: dict[str, Any]) -> None:
                data = json.dumps(out).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                if not self._authorized():
                    status, out = 401, {"error": {"message": "invalid api key"}}
                elif self.path.rstrip("/") != "/v1/chat/completions":
                    status, out = 404, {"error": {"message": f"no route {self.path}"}}
                else:
                    with replay._lock:
                        replay._in_flight += 1
                        replay.peak_in_flight = max(replay.peak_in_flight, replay._in_flight)
                    time.sleep(replay.delay_s)
                    status, out = replay._answer(json.loads(raw))
                    with replay._lock:
                        replay._in_flight -= 1
                self._send(status, out)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
