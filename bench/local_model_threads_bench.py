"""The local model server's thread count on a shared machine: seconds per chat request (a ~190
token prompt, 100 generated tokens) with 1 thread and with one per core, alone and beside one
busy process per core (what sandboxes, services and the learner put beside it). Writes
bench/results/local_model_threads.md; the ratio is against one-per-core in the same run."""

from __future__ import annotations

import datetime
import json
import multiprocessing
import os
import platform
import time
import urllib.request
from pathlib import Path

from aes_lib.checkpoints.bundled import LOCAL_MODEL_NAME
from aes_lib.models.serve import serve

REQUESTS = 3
OUT = Path(__file__).parent / "results" / "local_model_threads.md"


def _spin() -> None:
    while True:
        pass


def seconds_per_request(threads: int) -> float:
    server, url = serve(0, threads=threads)
    body = {"model": LOCAL_MODEL_NAME, "max_tokens": 100, "temperature": 0,
            "messages": [{"role": "user", "content": "Write a long story about a cat. " * 20}]}
    t0 = time.perf_counter()
    for _ in range(REQUESTS):
        req = urllib.request.Request(url + "/chat/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        json.loads(urllib.request.urlopen(req, timeout=900).read())
    del server
    return (time.perf_counter() - t0) / REQUESTS


def main() -> None:
    cores = os.cpu_count() or 2
    rows = []
    for busy in (False, True):
        spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(cores if busy else 0)]
        for p in spinners:
            p.start()
        try:
            all_cores = seconds_per_request(cores)
            one = seconds_per_request(1)
        finally:
            for p in spinners:
                p.kill()
        rows.append((busy, all_cores, one))
        print(f"busy={busy}: {cores} threads {all_cores:.2f}s, 1 thread {one:.2f}s per request", flush=True)
    lines = [f"# Local model server threads ({datetime.date.today()}, {platform.node()}, {cores} cores, "
             f"load {os.getloadavg()[0]:.1f} at the end)", "",
             f"Seconds per request, mean of {REQUESTS} (SmolLM2-135M GGUF, ~190 prompt + 100 generated tokens).", "",
             f"| beside | {cores} threads | 1 thread | speed-up of 1 thread |", "|---|---|---|---|"]
    lines += [f"| {'one busy process per core' if busy else 'nothing'} | {a:.2f} | {o:.2f} | {a / o:.2f}x |"
              for busy, a, o in rows]
    OUT.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
