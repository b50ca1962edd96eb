"""One DPPO learner update on the CPU: the trainer's path against a naive one.

The trainer (``aes_lib.learner.DppoTrainer``) runs the decoder, keeps only the
hidden states at positions that predict completion tokens, and computes their
log-probs from those and the output projection. The baseline, measured in the same
run on identical weights and batches, is the usual recipe: the full model forward
with logits at every position (prompt included), log-softmax over them, gather,
then the same DPPO loss and AdamW step. Reports update time, completion tokens/s,
the ratio to the baseline and the peak RSS growth of each (fresh process each).

Model: a random-init Llama with SmolLM2-135M's vocabulary (49,152) and a reduced
body; batch: solver groups of multi-hundred-token prompts with short completions,
the shape of an agent's turn.

Run: ``.venv/bin/python bench/learner_cpu_bench.py``; writes
``bench/results/kernels_learner_cpu.md``.
"""

from __future__ import annotations

import datetime
import multiprocessing as mp
import os
import platform
import resource
import statistics
import time
from pathlib import Path

import torch

VOCAB = 49_152
PROMPT, COMPLETION = 384, 32
GROUPS, GROUP_SIZE = 2, 4
STEPS = 3


def _setup():
    from transformers import LlamaConfig, LlamaForCausalLM

    from aes_lib.learner import Batcher, DppoTrainer, LearnerConfig, Sample, TokenizedTurn

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=256, intermediate_size=512, num_hidden_layers=4,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=1024,
                      tie_word_embeddings=True)
    model = LlamaForCausalLM(cfg).float()
    config = LearnerConfig(solver_group_size=GROUP_SIZE, groups_per_batch=GROUPS, lr=1e-5, kernel_backend="torch",
                           micro_batch_tokens=4 * (PROMPT + COMPLETION))
    batcher = Batcher(config)
    g = torch.Generator().manual_seed(1)
    for gi in range(GROUPS):
        for i in range(GROUP_SIZE):
            turn = TokenizedTurn(tuple(torch.randint(0, VOCAB, (PROMPT,), generator=g).tolist()),
                                 tuple(torch.randint(0, VOCAB, (COMPLETION,), generator=g).tolist()),
                                 tuple((-torch.rand(COMPLETION, generator=g) * 5 - 7).tolist()))
            batcher.add(Sample(f"{gi}-{i}", f"g{gi}", "solver", float(i % 2), (turn,)))
    batch = batcher.next_batch()
    assert batch is not None
    return model, config, batch, DppoTrainer(model, config)


def _naive_logprobs(trainer, seqs):
    """Baseline: logits at every position from the full model, then log-softmax and gather."""
    model = trainer.model
    width = max(s.length for s in seqs)
    ids = torch.zeros(len(seqs), width, dtype=torch.long)
    rows, cols, targets, mu, adv = [], [], [], [], []
    for i, s in enumerate(seqs):
        ids[i, : s.length] = torch.tensor(s.ids)
        rows += [i] * s.n_targets
        cols += [p - 1 for p in s.targets]
        targets += [s.ids[p] for p in s.targets]
        mu += s.logprobs
        adv += [s.advantage] * s.n_targets
    logp_all = model(input_ids=ids).logits.float().log_softmax(-1)  # the unbound head: full logits
    logp = logp_all[torch.tensor(rows), torch.tensor(cols), torch.tensor(targets)]
    return logp, torch.tensor(mu), torch.tensor(adv), torch.ones_like(logp)


def _child(kind: str, q) -> None:
    torch.set_num_threads(os.cpu_count() or 1)
    model, config, batch, trainer = _setup()
    if kind == "naive":
        trainer._token_logprobs = lambda seqs: _naive_logprobs(trainer, seqs)  # swap only the log-prob path
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    trainer.step(batch)  # warm-up (allocates AdamW state)
    times = []
    for _ in range(STEPS):
        t0 = time.perf_counter()
        stats = trainer.step(batch)
        times.append(time.perf_counter() - t0)
    q.put((statistics.median(times), stats.tokens, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024))


def _run(kind: str):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(kind, q))
    p.start()
    out = q.get()
    p.join()
    return out


def main() -> None:
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    mem = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/meminfo").read_text().splitlines()
                if ln.startswith("MemTotal")), "?")
    base = _run("naive")
    ours = _run("trainer")
    lines = [
        "# DPPO learner update on the CPU", "",
        f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}",
        f"- nproc: {os.cpu_count()}, CPU: {cpu}, memory: {mem}, torch {torch.__version__}",
        f"- model: random-init Llama, vocab {VOCAB:,}, hidden 256, 4 layers (tied embeddings)",
        f"- batch: {GROUPS} groups x {GROUP_SIZE}, prompt {PROMPT} + completion {COMPLETION} tokens; "
        f"median of {STEPS} updates after one warm-up", "",
        "| path | s / update | completion tokens/s | speed vs naive | peak RSS growth MiB | memory vs naive |",
        "|---|---|---|---|---|---|",
    ]
    for name, (secs, tokens, rss) in (("naive (logits at every position)", base), ("trainer (completion positions only)", ours)):
        mem = f"{rss / base[2]:.2f}x" if base[2] > 0 else "n/a"
        lines.append(f"| {name} | {secs:.2f} | {tokens / secs:,.0f} | {base[0] / secs:.2f}x | {rss:,.0f} | {mem} |")
    lines += ["", "On the CPU the log-prob itself is the torch reference (`kernel_backend=torch`); on CUDA the "
              "trainer uses the fused Triton kernel (see kernels_gpu.md)."]
    out = Path(__file__).parent / "results" / "kernels_learner_cpu.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
