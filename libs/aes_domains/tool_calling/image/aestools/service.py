"""``Service``: typed methods over JSON-on-HTTP on loopback, with a JSON state file.

Protocol: ``GET /methods`` -> ``{"service", "methods": [{"name", "doc", "params": [{"name",
"type", "required", "default"}], "writes"}]}``; ``POST /call/<method>`` with a JSON object of
arguments -> ``{"result": ...}``, or ``{"error": ...}`` with status 400 (bad call), 404
(unknown method) or 500 (the method failed).
"""

from __future__ import annotations

import copy
import inspect
import json
import os
import sys
import tempfile
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer

from aestools.types import ArgumentError, TypeSpec

ADDRESS = ("127.0.0.1", int(os.environ.get("AESTOOLS_PORT", "7410")))
"""Where services listen: loopback only (task containers have no network)."""
MAX_BODY = 1 << 20


class CallError(Exception):
    """Raised by a method for a call the service refuses (the message reaches the caller)."""


class _Method:
    def __init__(self, fn: Callable, writes: bool) -> None:
        self.fn, self.writes = fn, writes
        self.params: dict[str, tuple[TypeSpec, object]] = {}
        for p in inspect.signature(fn).parameters.values():
            if p.annotation is inspect.Parameter.empty:
                raise TypeError(f"{fn.__name__}: parameter {p.name!r} has no type annotation")
            self.params[p.name] = (TypeSpec.of(p.annotation), p.default)

    def describe(self) -> dict:
        return {
            "name": self.fn.__name__,
            "doc": inspect.getdoc(self.fn) or "",
            "writes": self.writes,
            "params": [{"name": n, "type": t.name, "required": d is inspect.Parameter.empty,
                        "default": None if d is inspect.Parameter.empty else d}
                       for n, (t, d) in self.params.items()],
        }

    def bind(self, args: object) -> dict:
        """``args`` checked against the signature; ``ArgumentError`` names the first problem."""
        name = self.fn.__name__
        if not isinstance(args, dict):
            raise ArgumentError(f"{name}: arguments must be a JSON object")
        if unknown := sorted(set(args) - set(self.params)):
            takes = ", ".join(self.params) or "none"
            raise ArgumentError(f"{name}: unexpected argument {unknown[0]!r} (takes: {takes})")
        for pname, (spec, default) in self.params.items():
            if pname in args:
                spec.check(f"{name}: argument {pname!r}", args[pname])
            elif default is inspect.Parameter.empty:
                raise ArgumentError(f"{name}: missing argument {pname!r} ({spec.name})")
        return args


class Service:
    """A named set of typed methods over one JSON state, kept at ``state`` (root-only, 0600).

    When ``state`` does not exist it starts as a copy of ``seed`` (a JSON file), so the
    task's image holds the starting data and the state file records every change.
    """

    def __init__(self, name: str, state: str, seed: str | None = None) -> None:
        self.name, self.state_path, self.seed_path = name, state, seed
        self.methods: dict[str, _Method] = {}
        self.state: dict = {}

    def method(self, fn: Callable | None = None, *, writes: bool = False):
        """Declare a method; its annotations are its argument types, its docstring its help.
        ``writes=True``: the state is saved after the call."""
        def register(f: Callable) -> Callable:
            self.methods[f.__name__] = _Method(f, writes)
            return f
        return register(fn) if fn is not None else register

    def load(self) -> None:
        path = self.state_path if os.path.exists(self.state_path) else self.seed_path
        if path is None:
            self.state = {}
        else:
            with open(path) as f:
                self.state = json.load(f)
        self.save()

    def save(self) -> None:
        """Atomically, so a killed service never leaves half a file."""
        folder = os.path.dirname(self.state_path) or "."
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".state-")
        with os.fdopen(fd, "w") as f:
            json.dump(self.state, f, indent=1, sort_keys=True)
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.state_path)

    def call(self, name: str, args: object) -> tuple[int, dict]:
        """(HTTP status, reply) of one call; a failed call leaves the state as it was."""
        m = self.methods.get(name)
        if m is None:
            return 404, {"error": f"unknown method {name!r} (known: {', '.join(sorted(self.methods))})"}
        try:
            kwargs = m.bind(args)
        except ArgumentError as e:
            return 400, {"error": str(e)}
        before = copy.deepcopy(self.state) if m.writes else None
        try:
            result = m.fn(**kwargs)
        except CallError as e:
            self.state = before if before is not None else self.state
            return 400, {"error": f"{name}: {e}"}
        except Exception as e:  # the service's bug: report it, keep serving
            self.state = before if before is not None else self.state
            return 500, {"error": f"{name} failed: {type(e).__name__}: {e}"}
        if m.writes:
            self.save()
        return 200, {"result": result}

    def serve(self) -> None:
        """Load the state and answer calls until killed."""
        self.load()
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/methods":
                    self._reply(200, {"service": service.name,
                                      "methods": [m.describe() for m in service.methods.values()]})
                else:
                    self._reply(404, {"error": f"no such path {self.path!r}"})

            def do_POST(self) -> None:
                if not self.path.startswith("/call/"):
                    return self._reply(404, {"error": f"no such path {self.path!r}"})
                size = int(self.headers.get("Content-Length") or 0)
                if size > MAX_BODY:
                    return self._reply(400, {"error": f"arguments exceed {MAX_BODY} bytes"})
                try:
                    args = json.loads(self.rfile.read(size) or b"{}")
                except ValueError as e:
                    return self._reply(400, {"error": f"arguments are not JSON: {e}"})
                self._reply(*service.call(self.path[len("/call/"):], args))

            def _reply(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, fmt: str, *args: object) -> None:
                sys.stderr.write(f"{service.name}: {fmt % args}\n")

        HTTPServer.allow_reuse_address = True
        with HTTPServer(ADDRESS, Handler) as server:
            print(f"{self.name}: serving {len(self.methods)} methods on {ADDRESS[0]}:{ADDRESS[1]}", file=sys.stderr,
                  flush=True)
            server.serve_forever()
