"""How far vLLM's served log-probs are from the trainer's, in fp32 and bf16 (issue 23).

DPPO's anchor is the sampler's log-prob of each completion token; the trainer recomputes the
same token's log-prob under its own weights and precision. This measures |served - trainer| on
SmolLM2-135M (the learner's starting weights) for every pairing of server precision (vLLM's CPU
build started by ``aes_lib.models.vllm_serve`` with ``AES_VLLM_DTYPE`` float32 or bfloat16) and
trainer precision (transformers in fp32 or bf16, ``log_softmax(logits / T)``), at T = 1.0 and 0.7,
over completions sampled from a few prompts. The fp32 server against the fp32 trainer is the
baseline each row's ratio is taken against.

Run: ``.venv/bin/python bench/vllm_logprobs_bench.py`` (needs ``make vllm``); writes
``bench/results/vllm_logprobs.md``.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engines_bench as eb  # noqa: E402  (starts vLLM as the stack does)
import training_bench as tb  # noqa: E402  (machine header, log)

OUT = tb.ROOT / "bench" / "results" / "vllm_logprobs.md"
PROMPTS = ("List the files in /app and print the largest one.", "Write a shell command that counts the lines of "
           "input.csv.", "Reverse the words of 'one two three' with a single command.", "What does `chmod 600` do?")
TEMPERATURES = (1.0, 0.7)
MAX_TOKENS = 48


async def sample(url: str) -> list[tuple[float, list[int], list[int], list[float]]]:
    """(T, prompt ids, completion ids, served log-probs) per prompt and temperature."""
    from aes_lib.models.client import ChatClient

    out = []
    async with ChatClient(url, "policy") as client:
        for t in TEMPERATURES:
            for i, prompt in enumerate(PROMPTS):
                turn = await client.chat([{"role": "user", "content": prompt}], max_tokens=MAX_TOKENS, temperature=t,
                                         seed=i)
                out.append((t, list(turn.prompt_token_ids), list(turn.completion_token_ids),
                            list(turn.completion_logprobs)))
    return out


def trainer(model: Path, dtype: str):
    import torch
    from transformers import AutoModelForCausalLM

    net = AutoModelForCausalLM.from_pretrained(model, dtype=getattr(torch, dtype)).eval()

    def logprobs(t: float, prompt: list[int], completion: list[int]) -> list[float]:
        ids = torch.tensor([prompt + completion])
        with torch.no_grad():
            logits = net(input_ids=ids).logits[0, len(prompt) - 1: -1].float()
        logp = (logits / t).log_softmax(-1)
        return logp[torch.arange(len(completion)), torch.tensor(completion)].tolist()

    return logprobs


def main() -> None:
    from aes_lib.config import Settings
    from aes_lib.learner.base_model import bundled_base_model

    header = [*tb.machine(), f"- load average at start: {tb.load_avg()} (1/5/15 min)"]
    tmp = Path(tempfile.mkdtemp(prefix="aes-logprobs-bench-"))
    model = bundled_base_model(Settings.from_env().home)
    served: dict[str, list] = {}
    for dtype in ("float32", "bfloat16"):
        tb.log(f"vLLM in {dtype}")
        os.environ["AES_VLLM_DTYPE"] = dtype
        (tmp / dtype).mkdir()
        proc, url = eb.start_vllm(model, tmp / dtype)
        try:
            served[dtype] = asyncio.run(sample(url))
        finally:
            proc.terminate()
            proc.wait(60)
    rows = []
    for trainer_dtype in ("float32", "bfloat16"):
        tb.log(f"trainer in {trainer_dtype}")
        score = trainer(model, trainer_dtype)
        for server_dtype, samples in served.items():
            for t in TEMPERATURES:
                diffs = [abs(a - b) for temp, p, c, lp in samples if temp == t
                         for a, b in zip(lp, score(t, p, c), strict=True)]
                rows.append((server_dtype, trainer_dtype, t, len(diffs), max(diffs), statistics.fmean(diffs)))
    base = {t: next(r[5] for r in rows if r[:3] == ("float32", "float32", t)) for t in TEMPERATURES}
    lines = ["# vLLM's served log-probs against the trainer's, fp32 and bf16", "", *header,
             f"- model: SmolLM2-135M (the learner's starting weights); {len(PROMPTS)} prompts, completions of at most "
             f"{MAX_TOKENS} tokens sampled by each server (seed = prompt index); vLLM CPU build, --enforce-eager, "
             "--logprobs-mode processed_logprobs, as `aes up` starts it", "",
             "| server | trainer | T | tokens | max abs diff (nats) | mean abs diff | mean vs fp32/fp32 |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {s} | {tr} | {t} | {n} | {mx:.2e} | {mean:.2e} | {mean / base[t]:.0f}x |"
              for s, tr, t, n, mx, mean in rows]
    OUT.write_text("\n".join(lines) + "\n")
    tb.log(f"wrote {OUT}")


if __name__ == "__main__":
    main()
