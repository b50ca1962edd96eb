"""Seconds per published version, trainer to served, by weight transport, against vLLM's own
reload of the same folder, in one run; and model HTTP calls per turn.

a. **Seconds per version** on SmolLM2-135M (fp32) served by vLLM's CPU build as the stack starts
   it (``aes_lib.models.vllm_serve``), ``VERSIONS`` versions each, interleaved so the shared
   machine's load falls on all alike:
   - baseline: vLLM's raw reload of the filesystem transport's folder
     (``/collective_rpc reload_weights`` alone);
   - filesystem transport, served: ``publish_version`` (the trainer's export written once under
     ``AES_WEIGHTS_DIR``, untied, renamed into place, announced) then weight sync's load of it
     (check headers, pause, reload, reset prefix cache, set version, resume); also the same
     without the export's write (what the transport adds to writing the weights at all);
   - store transport (today's path), served: export to a temporary folder, upload to the blob
     store (``file://``), fetch, check, untie, pause, reload, ... resume.
b. **Model HTTP calls per turn**: a 3-turn chat against the same vLLM with ``ChatClient``,
   requests counted at the client.

Run: ``.venv/bin/python bench/weights_bench.py`` (needs ``make vllm``); writes
``bench/results/weights_bench.md``.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import training_bench as tb  # noqa: E402  (machine header, log)

OUT = tb.ROOT / "bench" / "results" / "weights_bench.md"
VERSIONS = 4
TURNS = 3
NOTES = [
    "Notes:",
    "- Target (issue 38): within 1.5x of vLLM's own reload. The filesystem transport's part, from the export's "
    "folder written to vLLM serving it, is the row 'served after the export's write'; the export's write itself "
    "(the trainer's `write_hf_folder`, 540 MB of fp32 here, half in bf16 with `AES_LEARNER_PUBLISH_DTYPE`) is paid "
    "by every folder transport and by the baseline's folder too, so it is shown apart.",
    "- Today's path (store) adds the upload and fetch (two more copies of the folder, each hashed) and a re-untie at "
    "the engine: issue 38 measured 3.92 s per load against 0.03 s to read the folder (engines_bench.md).",
    "- The untie is a kernel copy of the embedding's bytes (copy_file_range), ~0.1 s here; decoding and "
    "re-encoding the tensor, as before, took ~1 s under the same load.",
    "- The 2 cores are shared with other helpers' jobs (load columns): a run at load ~10 measured 2.2x for the same "
    "row, with that part swinging 1.3-3.2 s per version while the raw reload stayed ~0.9 s; read ratios of quiet runs.",
]


@dataclass
class Ctx:
    """The service context a trainer publishes through: settings, store, announcements kept."""

    settings: object
    blobs: object
    published: list = field(default_factory=list)

    async def publish(self, subject, msg) -> None:
        self.published.append(msg)


def start_vllm(model: Path, tmp: Path) -> tuple[subprocess.Popen, str]:
    url_file = tmp / "vllm.url"
    proc = subprocess.Popen([sys.executable, "-m", "aes_lib.models.vllm_serve", "--model", str(model),
                             "--url-file", str(url_file), "--workdir", str(tmp / "vllm")],
                            stdout=(tmp / "vllm.log").open("wb"), stderr=subprocess.STDOUT)
    t0 = time.monotonic()
    while not url_file.is_file():
        if proc.poll() is not None:
            raise RuntimeError(f"vLLM did not start; {tmp / 'vllm.log'}")
        time.sleep(0.5)
    tb.log(f"vLLM ready in {time.monotonic() - t0:.0f} s")
    return proc, url_file.read_text().strip()


async def raw_reload(url: str, folder: Path) -> float:
    t0 = time.monotonic()
    async with httpx.AsyncClient(timeout=600) as c:
        r = await c.post(url.removesuffix("/v1") + "/collective_rpc",
                         json={"method": "reload_weights", "kwargs": {"weights_path": str(folder)}})
        r.raise_for_status()
    return time.monotonic() - t0


async def versions(url: str, model_folder: Path, tmp: Path) -> dict[str, list[float]]:
    import torch
    from transformers import AutoModelForCausalLM

    from aes_lib.blobstore import open_store
    from aes_lib.config import Settings
    from aes_lib.learner.checkpoint import write_hf_folder
    from aes_lib.models.weights import VLLMEngineClient
    from aes_lib.weights.publish import publish_version
from aes_lib.weights.transport import VersionMeta

    model = AutoModelForCausalLM.from_pretrained(model_folder, dtype=torch.float32)
    base = Settings(home=tmp / "home", blob_url=f"file://{tmp / 'blobs'}", engine="vllm",
                    weights_dir=str(tmp / "shared"))
    ctx = Ctx(base, open_store(base.blob_location, base))
    engine = VLLMEngineClient(url, base)
    writes: list[float] = []

    async def write(folder: Path) -> None:  # the trainer's export (rank 0 of LearnerRuntime.export)
        t0 = time.monotonic()
        await asyncio.to_thread(write_hf_folder, model.state_dict(), model.config, folder, dtype=torch.float32,
                                tokenizer_from=model_folder)
        writes.append(time.monotonic() - t0)

    out: dict[str, list[float]] = {"raw": [], "filesystem": [], "filesystem_write": [], "filesystem_commit": [],
                                   "filesystem_load": [], "store": []}
    v = 0
    for i in range(VERSIONS):
        for transport in ("filesystem", "store"):
            v += 1
            with torch.no_grad():  # a new version: the weights move a little
                next(model.parameters()).add_(1e-4)
            ctx.settings = replace(base, weight_transport=transport)
            t0 = time.monotonic()
            pv = await publish_version(ctx, write, VersionMeta(version=v, prefix="bench/policy", base_model="smollm2",
                                                               run_id="bench", keep=2))
            published = time.monotonic() - t0
            r = await engine.load(pv)
            seconds = time.monotonic() - t0
            assert r.loaded and r.version == v == await engine.version(), (r, v)
            out[transport].append(seconds)
            if transport == "filesystem":
                out["filesystem_write"].append(writes[-1])
                out["filesystem_commit"].append(published - writes[-1])
                out["filesystem_load"].append(r.seconds)
                out["raw"].append(await raw_reload(url, Path(pv.folder)))
            tb.log(f"  v{v} {transport}: {seconds:.2f} s (export write {writes[-1]:.2f} s)"
                   + (f"; raw reload {out['raw'][-1]:.2f} s" if transport == "filesystem" else ""))
    return out


async def calls_per_turn(url: str) -> tuple[int, int, list[str]]:
    from aes_lib.models import ChatClient

    calls: list[str] = []

    async def count(request: httpx.Request) -> None:
        calls.append(f"{request.method} {request.url.path}")

    messages = [{"role": "user", "content": "Name three colours."}]
    async with ChatClient(url, "smollm2-135m") as client:
        client._http = httpx.AsyncClient(timeout=300, event_hooks={"request": [count]})
        for turn in range(TURNS):
            t = await client.chat(messages, max_tokens=8, temperature=1.0, seed=turn)
            assert t.policy_version is not None
            messages += [{"role": "assistant", "content": t.text}, {"role": "user", "content": "And three more?"}]
    return len(calls), TURNS, calls


def report(loads: dict | None, calls: tuple | None, header: list[str]) -> list[str]:
    lines = ["# Weight transports: seconds per version, trainer to served (SmolLM2-135M, vLLM CPU)", "", *header, ""]
    if loads:
        med = {k: statistics.median(v) for k, v in loads.items()}
        raw = med["raw"]
        fs_no_write = statistics.median(a - b for a, b in zip(loads["filesystem"], loads["filesystem_write"]))
        lines += ["## a. Seconds per published version", "",
                  f"Median of {VERSIONS} versions per path, interleaved in one run; baseline: vLLM's own reload "
                  "(`/collective_rpc reload_weights`) of the filesystem transport's folder, same run.", "",
                  "| path | s / version | vs vLLM's reload |", "|---|---|---|",
                  f"| vLLM's raw reload of the folder (baseline) | {raw:.2f} | 1.00x |",
                  f"| filesystem transport, export written to served | {med['filesystem']:.2f} | "
                  f"{med['filesystem'] / raw:.2f}x |",
                  f"| filesystem transport, served after the export's write (what the transport adds) | "
                  f"{fs_no_write:.2f} | {fs_no_write / raw:.2f}x |",
                  f"| of which: untie, check and rename into place, announce | {med['filesystem_commit']:.2f} | "
                  f"{med['filesystem_commit'] / raw:.2f}x |",
                  f"| of which: weight sync's load (version check, pause, reload, reset cache, set version, resume) | "
                  f"{med['filesystem_load']:.2f} | {med['filesystem_load'] / raw:.2f}x |",
                  f"| (the export's write alone: 540 MB of fp32 safetensors) | {med['filesystem_write']:.2f} | "
                  f"{med['filesystem_write'] / raw:.2f}x |",
                  f"| store transport (today's path), export written to served | {med['store']:.2f} | "
                  f"{med['store'] / raw:.2f}x |", ""]
    if calls:
        n, turns, seen = calls
        lines += ["## b. Model HTTP calls per turn", "",
                  f"{turns} turns of one `ChatClient` against the same vLLM, counted at the client: {n} requests, "
                  f"{n / turns:.2f} per turn; per turn after the client's one `GET /v1/models`: "
                  f"{(n - seen.count('GET /v1/models')) / turns:.2f} (main before this change: 2, a "
                  "`GET /weight_info` before each `POST /v1/chat/completions`).", "",
                  "Requests: " + ", ".join(f"`{c}`" for c in seen), ""]
    return lines + NOTES


async def main_async() -> None:
    from aes_lib.config import Settings
    from aes_lib.learner.base_model import bundled_base_model

    header = [*tb.machine(), f"- load average at start: {tb.load_avg()} (1/5/15 min; 2 shared cores: read the ratios)"]
    tmp = Path(tempfile.mkdtemp(prefix="aes-weights-bench-"))
    model = bundled_base_model(Settings.from_env().home)
    proc, url = start_vllm(model, tmp)
    loads = calls = None
    try:
        tb.log("a. versions")
        loads = await versions(url, model, tmp)
        tb.log("b. calls per turn")
        calls = await calls_per_turn(url)
    finally:
        proc.terminate()
        proc.wait(60)
    header.append(f"- load average at end: {tb.load_avg()}")
    OUT.write_text("\n".join(report(loads, calls, header)) + "\n")
    print(OUT.read_text())


if __name__ == "__main__":
    os.environ.setdefault("AES_HOME", str(tb.ROOT / ".aes"))
    asyncio.run(main_async())
