"""The three engines that can serve the policy, in one run: vLLM, the torch engine, GGUF.

a. **Episodes per engine vs concurrency 1/2/4/8.** Model-only solver episodes: the solver's
   system prompt and a task, then 2 turns of at most 32 tokens at T = 1 (the second turn sends
   the first reply back with a fixed observation), ``concurrency`` episodes at a time, against
   SmolLM2-135M-Instruct served by (i) the GGUF server (xllamacpp, Q4_1: the baseline), (ii) the
   torch engine (fp32 transformers) and (iii) vLLM's CPU build (fp32, ``aes_lib.models.vllm_serve``
   as the stack starts it). Generated tokens/s and episodes/h per level. Model generation is
   92-97% of a real rollout's wall time here (``training_bench.md``), so episodes/h bounds
   rollouts/h; the sandbox is left out so that the 2 shared cores measure the engines. One
   engine at a time (the others stopped).
b. **Seconds per weight load into vLLM**: ``VLLMEngineClient.load`` of a published version folder
   (fetch from a ``file://`` store, check, untie, pause, reload, reset prefix cache, resume),
   against the same folder's plain ``safetensors.torch.load_file`` in this process.

Run: ``.venv/bin/python bench/engines_bench.py`` (needs ``make vllm``; Docker and the aes-base
image is not needed); writes ``bench/results/engines_bench.md``.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import training_bench as tb  # noqa: E402  (same rollouts, levels and machine header)

OUT = tb.ROOT / "bench" / "results" / "engines_bench.md"
CONCURRENCY = (1, 2, 4, 8)
LOADS = 2
MAX_TOKENS = 32


def rollouts_at(c: int) -> int:
    return c


@dataclass
class Level:
    engine: str
    concurrency: int
    n: int
    wall: float
    tokens: int
    load: float

    @property
    def per_hour(self) -> float:
        return self.n / self.wall * 3600

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.wall


async def episode(url: str, i: int) -> int:
    from aes_lib.agents.solver import SYSTEM_PROMPT
    from aes_lib.models import ChatClient

    task = (tb.TASK_DIR / "instruction.md").read_text()
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": f"Task:\n{task}"}]
    tokens = 0
    async with ChatClient(url, "smollm2-135m") as client:
        for turn in range(2):
            t = await client.chat(messages, max_tokens=MAX_TOKENS, temperature=1.0, seed=1000 * i + turn)
            tokens += t.completion_tokens
            messages += [{"role": "assistant", "content": t.text}, {"role": "user", "content": "exit code 0, no output"}]
    return tokens


async def levels_of(engine: str, url: str, levels: list, flush) -> None:
    await episode(url, -1)  # warm
    for c in CONCURRENCY:
        n = rollouts_at(c)
        gate = asyncio.Semaphore(c)

        async def one(i: int) -> int:
            async with gate:
                return await episode(url, i)

        t0 = time.monotonic()
        tokens = sum(await asyncio.gather(*(one(i) for i in range(n))))
        lv = Level(engine, c, n, time.monotonic() - t0, tokens, os.getloadavg()[0])
        tb.log(f"  {engine} c={c}: {n} episodes in {lv.wall:.1f} s, {lv.tokens_per_s:.1f} tokens/s, load {lv.load:.1f}")
        levels.append(lv)
        flush()


def start_vllm(model: Path, tmp: Path) -> tuple[subprocess.Popen, str]:
    url_file = tmp / "vllm.url"
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "aes_lib.models.vllm_serve", "--model", str(model),
                             "--url-file", str(url_file), "--workdir", str(tmp / "vllm")],
                            stdout=(tmp / "vllm.log").open("wb"), stderr=subprocess.STDOUT)
    while not url_file.is_file():
        if proc.poll() is not None:
            raise RuntimeError(f"vLLM did not start; {tmp / 'vllm.log'}")
        time.sleep(0.5)
    tb.log(f"vLLM ready in {time.monotonic() - t0:.0f} s")
    return proc, url_file.read_text().strip()


async def vllm_loads(url: str, model: Path, tmp: Path) -> dict[str, list[float]]:
    from safetensors.torch import load_file

    from aes_lib.checkpoints import publish_folder
    from aes_lib.blobstore import open_store
    from aes_lib.config import Settings
    from aes_lib.models.weights import VLLMEngineClient
    from aes_proto.messages import PolicyVersion

    settings = Settings(home=tmp / "home", blob_url=f"file://{tmp / 'load-blobs'}")
    store = open_store(settings.blob_location, settings)
    client = VLLMEngineClient(url, settings)
    out: dict[str, list[float]] = {"load": [], "plain": []}
    for v in range(1, LOADS + 1):
        ref = publish_folder(store, f"bench/v{v}", model)
        r = await client.load(PolicyVersion(idempotency_key=f"b{v}", episode_id="b", version=v, checkpoint=ref))
        assert r.loaded and r.version == v, r
        out["load"].append(r.seconds)
        t0 = time.monotonic()
        for f in model.glob("*.safetensors"):
            load_file(str(f))
        out["plain"].append(time.monotonic() - t0)
        tb.log(f"  vLLM load v{v}: {r.seconds:.2f} s (plain read {out['plain'][-1]:.2f} s)")
    return out


def report(levels: list, loads: dict | None, header: list[str], notes: list[str]) -> list[str]:
    base = next((lv for lv in levels if lv.engine == "gguf" and lv.concurrency == 1), None)
    lines = ["# Engines: vLLM, torch, GGUF (SmolLM2-135M on the CPU)", "", *header, "",
             "## a. Model-only solver episodes per engine vs concurrency", "",
             "word-banana's prompt, 2 turns of at most 32 tokens at T = 1, as many episodes per level as its concurrency. "
             "Baseline: the GGUF server at concurrency 1, same run.", "",
             "| engine | concurrency | episodes | wall s | episodes/h | gen tokens/s | episodes/h vs base | "
             "tokens/s vs base | load (1 min) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for lv in levels:
        r1 = f"{lv.per_hour / base.per_hour:.2f}x" if base else "n/a"
        r2 = f"{lv.tokens_per_s / base.tokens_per_s:.2f}x" if base and base.tokens_per_s else "n/a"
        lines.append(f"| {lv.engine} | {lv.concurrency} | {lv.n} | {lv.wall:.1f} | {lv.per_hour:,.0f} | "
                     f"{lv.tokens_per_s:.1f} | {r1} | {r2} | {lv.load:.1f} |")
    if loads:
        med = {k: statistics.median(v) for k, v in loads.items()}
        lines += ["", "## b. Weight load into vLLM (SmolLM2-135M, fp32)", "", f"Median of {LOADS}.", "",
                  "| path | s / version | time vs plain |", "|---|---|---|",
                  f"| plain: safetensors load_file of the folder (baseline) | {med['plain']:.2f} | 1.00x |",
                  f"| VLLMEngineClient.load (fetch, check, untie, pause, reload, reset cache, resume) | "
                  f"{med['load']:.2f} | {med['load'] / med['plain']:.2f}x |"]
    return lines + ["", *notes]


async def main_async() -> None:
    from aes_lib.config import Settings
    from aes_lib.learner.base_model import bundled_base_model
    from aes_lib.models.serve import spawn
    from aes_lib.models.torch_serve import serve

    header = [*tb.machine(), f"- load average at start: {tb.load_avg()} (1/5/15 min; the 2 cores are shared "
                             "with other jobs: compare rows of similar load)"]
    tmp = Path(tempfile.mkdtemp(prefix="aes-engines-bench-"))
    model = bundled_base_model(Settings.from_env().home)
    levels: list = []
    loads = None
    notes = ["Notes:", "- Engines run one after another (GGUF, torch, vLLM), each alone among our processes on the machine's "
             "2 cores; other helpers' jobs (Docker builds, tests, a learner on torchrun) shared them throughout "
             "(load column, 1-minute load average): read the ratios, not the absolute numbers.",
             "- vLLM: CPU build 0.32, fp32, --enforce-eager, as `aes up` starts it; the torch engine batches up to 8 "
             "requests; the GGUF server has 2 slots (llama.cpp, Q4_1) and cannot load new weights.",
             "- b: the baseline reads the folder with safetensors load_file (memory-mapped, so it is nearly free); the load is mostly the fetch from the store (copy and sha256 of the 540 MB folder), the untie (a 113 MB head written) and vLLM's reload. INFRA notes measured ~0.5 s for the reload alone."]

    def flush() -> None:
        OUT.write_text("\n".join(report(levels, loads, header, notes)) + "\n")

    tb.log("a. GGUF")
    with spawn(tmp / "gguf.url", tmp / "gguf.log") as url:
        await levels_of("gguf", url, levels, flush)
    tb.log("a. torch")
    server, url = serve(model)
    try:
        await levels_of("torch", url, levels, flush)
    finally:
        server.shutdown()
        server.RequestHandlerClass.engine.close()
    tb.log("a. vLLM")
    proc, url = start_vllm(model, tmp)
    try:
        await levels_of("vllm", url, levels, flush)
        tb.log("b. vLLM weight loads")
        loads = await vllm_loads(url, model, tmp)
    finally:
        proc.terminate()
        proc.wait(60)
    header.append(f"- load average at end: {tb.load_avg()}")
    flush()
    print(OUT.read_text())


if __name__ == "__main__":
    os.environ.setdefault("AES_HOME", str(tb.ROOT / ".aes"))
    asyncio.run(main_async())
