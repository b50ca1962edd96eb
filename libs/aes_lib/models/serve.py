"""Serve the bundled SmolLM2-135M-Instruct GGUF over an OpenAI-compatible API.

``python -m aes_lib.models.serve --port P [--url-file F]`` loads the model with
xllamacpp (in-process llama.cpp server), prints ``URL <base_url>`` on stdout,
writes the base URL (``http://host:port/v1``) to ``--url-file`` when given, and
serves until SIGTERM/SIGINT. ``--port 0`` picks a free port. ``spawn()`` runs it
as a child process for tests and the embedded stack.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from aes_lib.checkpoints.bundled import LOCAL_MODEL_NAME, gguf_path


class ModelServerError(RuntimeError):
    """The model server process exited or did not report its URL in time."""


def serve(port: int, host: str = "127.0.0.1", ctx: int = 8192, parallel: int = 2, threads: int = 0):
    """Start the in-process server; returns (server, base_url). Keep the server referenced."""
    import xllamacpp

    p = xllamacpp.CommonParams()
    p.model.path = str(gguf_path())
    p.model_alias = {LOCAL_MODEL_NAME}
    p.hostnames = [host]
    p.port = port
    p.n_parallel = parallel
    p.n_ctx = ctx * parallel  # llama.cpp splits the context between slots
    # Half the cores by default: the server shares the machine with sandboxes, services and the
    # learner, and llama.cpp's threads meet at a barrier after every op, so one thread that loses
    # its core stalls the others (bench/results/local_model_threads.md: on 2 busy cores, 1 thread
    # answers 1.9-3.9x faster than 2).
    p.cpuparams.n_threads = threads or max(1, (os.cpu_count() or 2) // 2)
    p.cpuparams_batch.n_threads = p.cpuparams.n_threads
    server = xllamacpp.Server(p)
    return server, server.listening_address.rstrip("/") + "/v1"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m aes_lib.models.serve", description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--ctx", type=int, default=8192, help="context tokens per parallel slot")
    ap.add_argument("--parallel", type=int, default=2, help="requests decoded at once")
    ap.add_argument("--threads", type=int, default=0, help="0: half the cores")
    ap.add_argument("--url-file", type=Path, help="write the base URL here once serving")
    args = ap.parse_args(argv)
    server, url = serve(args.port, args.host, args.ctx, args.parallel, args.threads)
    if args.url_file:
        tmp = args.url_file.with_suffix(".tmp")
        tmp.write_text(url + "\n")
        tmp.replace(args.url_file)  # readers never see a half-written URL
    print(f"URL {url}", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    del server
    return 0


@contextlib.contextmanager
def spawn(url_file: Path, log_file: Path, *, port: int = 0, parallel: int = 2, start_timeout_s: float = 120.0) -> Iterator[str]:
    """Run the server as a child process; yields its base URL; terminates it on exit."""
    url_file.unlink(missing_ok=True)
    with open(log_file, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "aes_lib.models.serve", "--port", str(port),
             "--parallel", str(parallel), "--url-file", str(url_file)],
            stdout=log, stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + start_timeout_s
        while not url_file.exists():
            if proc.poll() is not None:
                raise ModelServerError(f"model server exited with {proc.returncode}; see {log_file}")
            if time.monotonic() > deadline:
                raise ModelServerError(f"model server gave no URL within {start_timeout_s}s; see {log_file}")
            time.sleep(0.1)
        yield url_file.read_text().strip()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def endpoint(url: str, home: Path) -> Iterator[str]:
    """``url`` when one is configured, else the local model served for the duration."""
    if url:
        yield url
        return
    d = home / "model"
    d.mkdir(parents=True, exist_ok=True)
    with spawn(d / "url", d / "server.log") as local:
        yield local


if __name__ == "__main__":
    sys.exit(main())
