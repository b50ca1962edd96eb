"""The learner on 1 vs 2 FSDP2 ranks (CPU, gloo), and what merging multi-turn samples saves.

One run measures, on the same random-init Llama-shaped model and the same batch:

a. **Memory per rank** of parameters + gradients + AdamW moments (the bytes each rank
   holds after an update: its shards of the DTensors), for 1 and 2 ranks under torchrun.
b. **Tokens/s** of a whole update (forward, backward, reduce-scatter, AdamW) at 1 and 2
   ranks (median of a few updates after a warm-up). torchrun gives each rank one thread
   (``OMP_NUM_THREADS=1``), so 2 ranks use twice the cores of 1; on a machine shared with
   other work the times are dominated by its load: read them as a smoke figure, not a speed-up.
c. **Merged turns**: a batch of 10-turn agent episodes (each prompt = previous prompt +
   completion + tool reply), trained turn by turn vs merged into one sequence per episode
   (``merge_turns``): tokens forwarded and time per update, one process.

Run: ``.venv/bin/python bench/learner_scale_bench.py``; writes ``bench/results/learner_scale_cpu.md``.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
VOCAB, HIDDEN, LAYERS = 8192, 256, 4
STEPS = 2
PROMPT, COMPLETION, SAMPLES = 128, 32, 4
TURNS, TOOL_REPLY = 10, 32


def _model_dir(tmp: Path) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=4 * HIDDEN, num_hidden_layers=LAYERS,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=2048,
                      tie_word_embeddings=False)
    LlamaForCausalLM(cfg).save_pretrained(tmp / "model")
    return tmp / "model"


def _batch(multi_turn: bool):
    from aes_lib.learner import Batch, Group, Sample, TokenizedTurn

    rng = random.Random(0)
    tok = lambda n: tuple(rng.randrange(VOCAB) for _ in range(n))  # noqa: E731
    lp = lambda n: tuple(-rng.uniform(0.5, 5.0) for _ in range(n))  # noqa: E731
    samples = []
    for i in range(SAMPLES):
        if multi_turn:
            turns, prompt = [], tok(PROMPT // 2)
            for _ in range(TURNS):
                c = tok(COMPLETION // 2)
                turns.append(TokenizedTurn(prompt, c, lp(len(c))))
                prompt = prompt + c + tok(TOOL_REPLY)
        else:
            turns = [TokenizedTurn(tok(PROMPT), tok(COMPLETION), lp(COMPLETION))]
        samples.append(Sample(f"r{i}", "g", "solver", float(i % 2), tuple(turns)))
    adv = [s.reward - 0.5 for s in samples]
    return Batch("solver", (Group("g", "solver", tuple(samples), tuple(adv)),), 0, 0, 0)


def _config(**kw):
    from aes_lib.learner import LearnerConfig

    return LearnerConfig(lr=1e-5, kernel_backend="torch", micro_batch_tokens=4 * (PROMPT + COMPLETION), **kw)


def _local_bytes(tensors) -> int:
    return sum((t.to_local() if hasattr(t, "to_local") else t).nbytes for t in tensors if t is not None)


def rank_worker(out: Path, model_dir: str) -> None:
    """One rank under torchrun: warm-up, timed updates, then the bytes it holds."""
    import torch.distributed as dist

    from aes_lib.learner.distributed import init_ranks
    from aes_lib.learner.runtime import LearnerRuntime

    cfg = _config()
    init_ranks(cfg)
    rt = LearnerRuntime(None)  # each rank steps its share of the plan in process
    rt.build(cfg, model_dir)
    plan = rt.trainer.plan(_batch(False), dist.get_world_size())
    rt.trainer.step_share(plan.shares[dist.get_rank()], plan.n_tokens, plan.n_micro)
    times = []
    for _ in range(STEPS):
        dist.barrier()
        t0 = time.perf_counter()
        stats = rt.trainer.step_share(plan.shares[dist.get_rank()], plan.n_tokens, plan.n_micro)
        times.append(time.perf_counter() - t0)
    params = list(rt.model.parameters())
    moments = [t for s in rt.trainer.optimizer.state.values() for t in s.values() if t.dim() > 0]
    row = {"params": _local_bytes(params), "grads": _local_bytes(p.grad for p in params),
           "optimizer": _local_bytes(moments), "seconds": statistics.median(times), "tokens": stats.tokens,
           "forwarded": stats.sequence_tokens}
    (out / f"rank{dist.get_rank()}-of{dist.get_world_size()}.json").write_text(json.dumps(row))
    dist.destroy_process_group()


def _ranks(n: int, out: Path, model_dir: Path) -> list[dict]:
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}",
                    __file__, "--rank-worker", str(out), str(model_dir)], check=True, capture_output=True)
    return [json.loads((out / f"rank{r}-of{n}.json").read_text()) for r in range(n)]


def _merged(model_dir: Path) -> dict[bool, tuple[float, int, int]]:
    from transformers import AutoModelForCausalLM

    from aes_lib.learner import DppoTrainer

    res = {}
    batch = _batch(True)
    for merge in (False, True):
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        trainer = DppoTrainer(model, _config(merge_turns=merge))
        trainer.step(batch)
        times = []
        for _ in range(STEPS):
            t0 = time.perf_counter()
            stats = trainer.step(batch)
            times.append(time.perf_counter() - t0)
        res[merge] = statistics.median(times), stats.tokens, stats.sequence_tokens
    return res


def main() -> None:
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    mib = lambda b: b / 2**20  # noqa: E731
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = _model_dir(Path(tmp))
        runs = {n: _ranks(n, Path(tmp), model_dir) for n in (1, 2)}
        merged = _merged(model_dir)
    n_params = runs[1][0]["params"] // 4
    lines = [
        "# Learner on FSDP2 ranks (CPU, gloo) and merged multi-turn samples", "",
        f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}",
        f"- machine: {os.cpu_count()} cores ({cpu}), shared with other work; torch {torch.__version__}",
        f"- model: random-init Llama, {n_params / 1e6:.1f}M parameters (vocab {VOCAB}, hidden {HIDDEN}, "
        f"{LAYERS} layers, untied), fp32; AdamW",
        f"- a/b batch: {SAMPLES} single-turn samples, prompt {PROMPT} + completion {COMPLETION} tokens; "
        f"median of {STEPS} updates after a warm-up", "",
        "## a/b. Memory per rank and throughput", "",
        "| ranks | params MiB/rank | grads MiB/rank | AdamW MiB/rank | total MiB/rank | vs 1 rank | s/update | "
        "completion tokens/s | forwarded tokens/s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    base_total = sum(runs[1][0][k] for k in ("params", "grads", "optimizer"))
    for n, rows in runs.items():
        r = max(rows, key=lambda r: r["params"] + r["grads"] + r["optimizer"])  # the fullest rank
        total = r["params"] + r["grads"] + r["optimizer"]
        secs = max(x["seconds"] for x in rows)
        lines.append(f"| {n} | {mib(r['params']):.1f} | {mib(r['grads']):.1f} | {mib(r['optimizer']):.1f} | "
                     f"{mib(total):.1f} | {total / base_total:.2f}x | {secs:.2f} | {r['tokens'] / secs:,.0f} | "
                     f"{r['forwarded'] / secs:,.0f} |")  # the step's counts are already summed over ranks
    (t_split, tokens, fwd_split), (t_merged, _, fwd_merged) = merged[False], merged[True]
    lines += [
        "", f"## c. Merged turns ({SAMPLES} episodes of {TURNS} turns: completion {COMPLETION // 2}, "
        f"tool reply {TOOL_REPLY}, first prompt {PROMPT // 2} tokens; one process)", "",
        "| training sequences | tokens forwarded | completion tokens | s/update | vs turn by turn |",
        "|---|---|---|---|---|",
        f"| one per turn | {fwd_split:,} | {tokens:,} | {t_split:.2f} | 1.00x |",
        f"| merged per episode | {fwd_merged:,} | {tokens:,} | {t_merged:.2f} | "
        f"{t_split / t_merged:.2f}x faster, {fwd_split / fwd_merged:.2f}x fewer tokens |",
        "", "Same loss either way (tests/learner/test_sequences.py).",
    ]
    out = ROOT / "bench" / "results" / "learner_scale_cpu.md"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    for p in ("proto", "libs", "services", "kernels"):
        sys.path.insert(0, str(ROOT / p))
    if sys.argv[1:2] == ["--rank-worker"]:
        rank_worker(Path(sys.argv[2]), sys.argv[3])
    else:
        main()
