"""Generation modes on the local model: Prompt, Prompt + Env Feedback, agentic harness.

Runs ``n`` generations per mode with SmolLM2-135M (served by xllamacpp for the run),
judges each with the validator's library function, and reports the valid-environment
rate with a 95% Wilson interval, cost per valid environment, tokens, and seconds per
episode as a ratio against the Prompt baseline measured in the same run. It also
measures the model client's overhead for recording prompt token ids (two extra
llama.cpp calls per turn) as a ratio against plain chat calls.

Run: ``.venv/bin/python bench/generate_modes.py [--n 1]``; writes
``bench/results/generate_modes.md``. Needs Docker and the aes-base image.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from aes_lib.agents.proposer.baselines import BaselineLimits
from aes_lib.agents.proposer.boundary import MODES, Resources
from aes_ops.compare import HEADER, run_mode
from aes_lib.agents.proposer.harness import EpisodeBudget
from aes_lib.blobstore import open_store
from aes_lib.bundle import pack
from aes_lib.models import ChatClient
from aes_lib.checkpoints.bundled import LOCAL_MODEL_NAME
from aes_lib.models.serve import spawn
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import ImageCache

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "generate_modes.md"


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    mem_kb = next(int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal"))
    return f"{os.cpu_count()} cores ({cpu}), {mem_kb / 2**20:.1f} GiB, Python {platform.python_version()}"


async def client_overhead(url: str, calls: int) -> tuple[float, float]:
    """Median seconds per call without and with prompt-id recording (same prompt, 16 tokens)."""
    msgs = [{"role": "user", "content": "Name one shell command that lists files."}]
    out = []
    for want in (False, True):
        async with ChatClient(url, LOCAL_MODEL_NAME, want_prompt_ids=want) as c:
            times = []
            for i in range(calls):
                t0 = time.monotonic()
                await c.chat(msgs, max_tokens=16, temperature=0.0, seed=i)
                times.append(time.monotonic() - t0)
        out.append(statistics.median(times))
    return out[0], out[1]


async def bench(url: str, n: int, tmp: Path) -> list[str]:
    store = open_store(f"file://{tmp / 'blobs'}")
    parent_dir = ROOT / "seeds" / "csv-sales-rollup"
    packed = pack(parent_dir)
    parent = (packed.sha256, store.put_content("bundles", packed.data, suffix=".tar.gz"))
    budget = EpisodeBudget().with_loop(max_turns=3, max_tokens=192)
    baseline = BaselineLimits(max_tokens=384, max_revisions=1)
    images = ImageCache(kinds=DomainKinds())
    rows, stats = [], {}
    for mode in MODES:
        async with ChatClient(url, LOCAL_MODEL_NAME) as client, ChatClient(url, LOCAL_MODEL_NAME) as solver:
            resources = Resources(client, store, images, tmp / "state.tar.gz", solver_client=solver, budget=budget,
                                  baseline=baseline)
            s = await run_mode(mode, n, resources, parent=parent, category="data-processing")
        stats[mode] = s
        rows.append(s.row())
        print(s.row(), flush=True)
    base_s = stats["prompt"].seconds / max(stats["prompt"].n, 1)
    ratios = [f"- {m}: {stats[m].seconds / max(stats[m].n, 1) / base_s:.2f}x the Prompt baseline's seconds per episode"
              for m in MODES]
    return rows, ratios


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1, help="generations per mode")
    ap.add_argument("--overhead-calls", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="aes-bench-generate-") as tmp:
        with spawn(Path(tmp) / "url", Path(tmp) / "server.log") as url:
            plain, recorded = asyncio.run(client_overhead(url, args.overhead_calls))
            rows, ratios = asyncio.run(bench(url, args.n, Path(tmp)))
    text = "\n".join([
        "# Generation modes on the local model",
        "",
        f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}",
        f"- machine: {machine()}; load average at the end: {os.getloadavg()[0]:.1f} (shared with other jobs)",
        f"- model: SmolLM2-135M-Instruct Q4_1 via xllamacpp; parent task seeds/csv-sales-rollup; n = {args.n} per mode",
        "- budgets: Prompt 384 tokens; Feedback 384 tokens x (1 + 1 revision); agent 3 turns x 192 tokens",
        "",
        HEADER,
        *rows,
        "",
        "Seconds per episode relative to the Prompt baseline (same run):",
        *ratios,
        "",
        "## Recording prompt token ids (ChatClient, 16-token completions, median of "
        f"{args.overhead_calls} calls)",
        f"- plain chat call: {plain:.3f} s; with prompt ids (/apply-template + /tokenize): {recorded:.3f} s; "
        f"ratio {recorded / plain:.2f}x",
        "",
        "A 135M model rarely writes a valid task; the table shows the harness and the measurement, "
        "not what a capable proposer reaches. Costs are 0 because the local model is priced at 0; "
        "`aes generate --model-url URL --model NAME` against a priced endpoint gives USD.",
        "",
    ])
    OUT.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
