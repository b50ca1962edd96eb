"""Serve a ``TorchEngine`` over an OpenAI-compatible API that follows the learner.

``python -m aes_lib.models.torch_serve --model DIR --port P [--url-file F]``:

- ``GET /v1/models``: the served model and its ``policy_version``;
- ``POST /v1/chat/completions``: a chat completion with ``logprobs.content[*].id``
  (token ids), top-level ``prompt_token_ids`` and ``policy_version`` (the weights
  that sampled it); ``response_format`` is accepted and not enforced;
- ``GET /v1/aes/policy``: ``{"version", "model"}``;
- ``POST /v1/aes/policy`` ``{"version", "checkpoint": BlobRef}`` or ``{"version", "folder"}``:
  load that published version (an HF-format folder; the ref is its manifest) from the blob
  store (``AES_BLOB_URL``, as every service finds it), or from a folder on a filesystem it
  shares with the trainer (``aes_lib.weights``' filesystem transport), unless it is not newer;
  answers ``{"version", "loaded", "seconds"}``.

Every completion also carries its version as the ``X-AES-Weight-Version`` header
(``aes_lib.models.served_version``), as vLLM's does.

Errors are JSON ``{"error": {"message", "type"}}`` with 400 for bad requests.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import msgspec

from aes_lib.models.engine import EngineError, GenRequest, TorchEngine
from aes_lib.models.served_version import HEADER as VERSION_HEADER
from aes_proto.messages import BlobRef

SERVED_NAME = "policy"
"""Name the server answers to by default (any requested model name is accepted)."""


class _BadRequest(ValueError):
    pass


def _checkpoint_loader():
    """Reads published versions (HF-format folders) from a shared folder as they are, or from the
    configured blob store (``ref`` their manifest; the store opened on first use)."""
    store = None

    def load(where: BlobRef | str):
        nonlocal store
        from aes_lib.blobstore import open_store
        from aes_lib.checkpoints import check_folder
        from aes_lib.config import Settings
        from aes_lib.learner.checkpoint import folder_tensors, policy_tensors

        if isinstance(where, str):
            check_folder(Path(where))
            return folder_tensors(Path(where))
        ref = where
        if store is None:
            settings = Settings.from_env()
            store = open_store(settings.blob_location, settings)
        return policy_tensors(store, ref)

    return load


class _Handler(BaseHTTPRequestHandler):
    engine: TorchEngine
    name: str
    load_checkpoint = None

    def log_message(self, fmt: str, *args) -> None:  # one line per request on stderr is noise here
        pass

    def _send(self, code: int, body: dict, version: int | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if version is not None:
            self.send_header(VERSION_HEADER, str(version))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict:
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        except ValueError as e:
            raise _BadRequest(f"body is not JSON: {e}") from None
        if not isinstance(body, dict):
            raise _BadRequest("body must be a JSON object")
        return body

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            self._send(200, {"object": "list", "data": [
                {"id": self.name, "object": "model", "policy_version": self.engine.version}]})
        elif self.path.rstrip("/") == "/v1/aes/policy":
            self._send(200, {"version": self.engine.version, "model": self.engine.name})
        else:
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        try:
            body = self._body()
            if self.path.rstrip("/") == "/v1/chat/completions":
                reply = self._chat(body)
                self._send(200, reply, version=reply["policy_version"])
            elif self.path.rstrip("/") == "/v1/aes/policy":
                self._send(200, self._load(body))
            else:
                self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
        except (_BadRequest, EngineError) as e:
            self._send(400, {"error": {"message": str(e), "type": "invalid_request_error"}})
        except Exception as e:  # the server stays up; the client retries 5xx
            self._send(500, {"error": {"message": f"{type(e).__name__}: {e}", "type": "server_error"}})

    def _chat(self, body: dict) -> dict:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(
                isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages):
            raise _BadRequest("messages must be a non-empty list of {role, content}")
        stop = body.get("stop") or ()
        try:
            req = GenRequest(
                prompt_ids=tuple(self.engine.chat_prompt_ids(messages)),
                max_tokens=int(body.get("max_tokens") or body.get("max_completion_tokens") or 256),
                temperature=float(body.get("temperature", 1.0)),
                stop=(stop,) if isinstance(stop, str) else tuple(stop),
                seed=None if body.get("seed") is None else int(body["seed"]),
            )
        except (TypeError, ValueError) as e:
            raise _BadRequest(str(e)) from None
        res = self.engine.generate(req)
        pieces = [self.engine.tokenizer.decode([t]) for t in res.token_ids]
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.name,
            "policy_version": res.policy_version,
            "prompt_token_ids": list(req.prompt_ids),
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": res.text},
                "finish_reason": res.finish_reason,
                "logprobs": {"content": [{"id": t, "token": p, "logprob": lp}
                                         for t, p, lp in zip(res.token_ids, pieces, res.logprobs)]},
            }],
            "usage": {"prompt_tokens": len(req.prompt_ids), "completion_tokens": len(res.token_ids),
                      "total_tokens": len(req.prompt_ids) + len(res.token_ids)},
        }

    def _load(self, body: dict) -> dict:
        try:
            version = int(body["version"])
            where = str(body["folder"]) if body.get("folder") else msgspec.convert(body["checkpoint"], BlobRef)
        except (KeyError, TypeError, ValueError, msgspec.ValidationError) as e:
            raise _BadRequest(f"expected {{version, checkpoint: {{key, sha256, size}}}} or {{version, folder}}: "
                              f"{e}") from None
        t0 = time.monotonic()
        loaded = version > self.engine.version and self.engine.load_state_dict(type(self).load_checkpoint(where),
                                                                               version)
        return {"version": self.engine.version, "loaded": bool(loaded), "seconds": time.monotonic() - t0}


def serve(model: Path, port: int = 0, host: str = "127.0.0.1", name: str = SERVED_NAME,
          version: int = 0, max_batch: int = 8) -> tuple[ThreadingHTTPServer, str]:
    """Start serving in a background thread; returns (server, base_url)."""
    engine = TorchEngine.from_folder(model, version=version, max_batch=max_batch)
    handler = type("Handler", (_Handler,), {"engine": engine, "name": name,
                                             "load_checkpoint": staticmethod(_checkpoint_loader())})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server, f"http://{host}:{server.server_address[1]}/v1"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m aes_lib.models.torch_serve", description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, help="transformers model folder (default: the learner's starting weights, "
                                                "AES_LEARNER_MODEL_PATH, else the bundled SmolLM2, exported)")
    ap.add_argument("--port", type=int, default=0, help="0 picks a free port")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--name", default=SERVED_NAME, help="model name reported by /v1/models")
    ap.add_argument("--max-batch", type=int, default=8, help="requests decoded together")
    ap.add_argument("--url-file", type=Path, help="write the base URL here once serving")
    args = ap.parse_args(argv)
    model = args.model
    if model is None:  # serve what the learner starts from, so sampler and trainer agree from v0
        from aes_lib.config import Settings
        from aes_lib.learner import LearnerConfig
        from aes_lib.learner.base_model import bundled_base_model

        model = Path(LearnerConfig.from_env().model_path or bundled_base_model(Settings.from_env().home))
    server, url = serve(model, args.port, args.host, args.name, max_batch=args.max_batch)
    if args.url_file:
        tmp = args.url_file.with_suffix(".tmp")
        tmp.write_text(url + "\n")
        tmp.replace(args.url_file)
    print(f"URL {url}", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
