"""How often test_learning's word policy learns, per optimizer setting, over many seeds.

``tests/training/test_learning.py`` trains the word policy through the services (vLLM,
Docker, the learner) in waves of 2 groups x 8 attempts at temperature 0.5. When a CI run
failed it (0.69), it ran 6 waves and asked that the last 3 average 0.7 or more; this bench
replays that version (the test now runs 8 waves at adam_eps 1e-5 and asks 0.65 of the last 4)
in one process, fast enough for dozens of seeds: the same word
policy (``tests/training/conftest.py``), prompts and sampling temperature, replies
parsed by the solver's own ``parse_action``, and one real ``DppoTrainer`` update per
group with a reward spread. Only the sampler (transformers instead of vLLM) and the
container (the reply's ``echo WORDS > /app/answer.txt`` is read instead of run) stand in.

Per setting it reports the share of runs that pass the test's criterion and the
collapses: a wave at 0.25 or less right after one at 0.75 or more (the reply format
breaks in one update, and words of noise follow ``echo banana``). The first setting
given is the baseline.

Run: ``.venv/bin/python bench/word_policy_stability.py --seeds 30 --setting lr=2.5e-4
--setting lr=2.5e-4,adam_eps=1e-5``; writes ``bench/results/word_policy_stability.md``.
About 1 minute per run per core.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import re
import statistics
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WAVES, GROUP, TEMPERATURE, MAX_TOKENS = 6, 8, 0.5, 32  # test_learning.py's loop when CI failed it
ECHO = re.compile(r"echo ([\w ]*) > /app/answer\.txt")


def _fixtures(name: str, path: str):
    """A conftest of the suite: the word policy's recipe and prompts, not a copy of them."""
    sys.path.insert(0, str(ROOT / "tests"))  # their built_once helper
    spec = importlib.util.spec_from_file_location(name, ROOT / path)
    module = sys.modules[name] = importlib.util.module_from_spec(spec)  # its dataclasses look it up
    spec.loader.exec_module(module)
    return module


def _training_fixtures():
    return _fixtures("training_conftest", "tests/training/conftest.py")


def build_policy(folder: Path) -> Path:
    """The vLLM-shaped tiny model of ``tests/conftest.py`` taught the two words."""
    from aes_lib.learner.base_model import bundled_base_model

    suite = _fixtures("suite_conftest", "tests/conftest.py")
    tiny = suite.tiny_from(bundled_base_model(folder / "home"), folder / "tiny", **suite.VLLM_TINY_DIMS)
    return _training_fixtures()._teach_words(tiny, folder / "word")


def reward(reply: str) -> float:
    """1 when the solver would run ``echo banana > /app/answer.txt`` (the verifier reads the
    word back), else 0: a format error, another word, or more than one word."""
    from aes_lib.agents.parse import parse_action

    action = parse_action(reply)
    written = ECHO.fullmatch(action.command)
    return float(bool(written) and " ".join(written.group(1).split()) == "banana")


def run(policy: Path, setting: dict, seed: int) -> list[float]:
    """One replay of the test: the mean reward of each wave."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from aes_lib.learner import DppoTrainer, LearnerConfig, TokenizedTurn, centred, has_signal
    from aes_lib.learner.sequences import pack_turns

    torch.set_num_threads(1)
    fixtures = _training_fixtures()
    tok = AutoTokenizer.from_pretrained(policy)
    model = AutoModelForCausalLM.from_pretrained(policy, dtype=torch.float32)
    trainer = DppoTrainer(model, LearnerConfig(groups_per_batch=1, kernel_backend="torch", **setting))
    prompts = [fixtures.solver_prompt_ids(tok, fixtures.TASKS / t) for t in ("word-banana", "word-banana-alt")]
    rng = torch.Generator().manual_seed(seed)
    means = []
    for _ in range(WAVES):
        wave = []
        for prompt in prompts:
            turns, rewards = [], []
            model.eval()
            with torch.no_grad():
                for _ in range(GROUP):
                    ids, logprobs = list(prompt), []
                    for _ in range(MAX_TOKENS):
                        lp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0, -1] / TEMPERATURE, -1)
                        token = int(torch.multinomial(lp.exp(), 1, generator=rng))
                        ids.append(token)
                        logprobs.append(float(lp[token]))
                        if token == tok.eos_token_id:
                            break
                    completion = tuple(ids[len(prompt):])
                    turns.append(TokenizedTurn(tuple(prompt), completion, tuple(logprobs), TEMPERATURE))
                    rewards.append(reward(tok.decode(completion, skip_special_tokens=True)))
            wave += rewards
            if has_signal(rewards):
                seqs = [s for t, a in zip(turns, centred(rewards)) for s in pack_turns((t,), a, True)]
                trainer.step_share(seqs, sum(s.n_targets for s in seqs), 1)
        means.append(statistics.fmean(wave))
    return means


def collapses(means: list[float]) -> int:
    return sum(a >= 0.75 and b <= 0.25 for a, b in zip(means, means[1:]))


def passes(means: list[float]) -> bool:
    return statistics.fmean(means[WAVES // 2:]) >= 0.7  # test_learning.py's criterion


def parse_setting(text: str) -> dict:
    return {k: float(v) for k, v in (item.split("=") for item in text.split(","))}


def report(results: dict[str, list[list[float]]], seeds: int, started: str) -> str:
    base = next(iter(results))
    lines = [
        "# Word policy stability (test_learning.py's loop, in process)", "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}. Date: {started}.",
        f"Seeds 0-{seeds - 1} per setting; {WAVES} waves of 2 groups x {GROUP} at temperature {TEMPERATURE}, "
        f"{MAX_TOKENS} tokens; the baseline is `{base}`. Written by `bench/word_policy_stability.py`.", "",
        "| setting | runs passing (late mean >= 0.7) | runs with a collapse | collapses | mean of late means | "
        "lowest late mean | failures vs baseline |",
        "|---|---|---|---|---|---|---|",
    ]
    fail_base = sum(not passes(m) for m in results[base])
    for name, runs in results.items():
        late = [statistics.fmean(m[WAVES // 2:]) for m in runs]
        fails = sum(not passes(m) for m in runs)
        ratio = f"{fails}/{fail_base}" if fail_base else "-"
        lines.append(f"| `{name}` | {len(runs) - fails}/{len(runs)} | {sum(collapses(m) > 0 for m in runs)} | "
                     f"{sum(collapses(m) for m in runs)} | {statistics.fmean(late):.3f} | {min(late):.3f} | {ratio} |")
    lines += ["", "Per run, the mean reward of each wave:", ""]
    for name, runs in results.items():
        lines.append(f"- `{name}`: " + "; ".join(" ".join(f"{x:.2f}" for x in m) for m in runs))
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument("--setting", action="append", required=True,
                    help="LearnerConfig fields as key=value,...; the first is the baseline")
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/word_policy_stability.md")
    args = ap.parse_args()
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    with tempfile.TemporaryDirectory() as tmp:
        policy = build_policy(Path(tmp))
        results: dict[str, list[list[float]]] = {}
        with ProcessPoolExecutor(args.workers) as pool:
            for name in args.setting:
                futures = [pool.submit(run, policy, parse_setting(name), s) for s in range(args.seeds)]
                results[name] = []
                for seed, f in enumerate(futures):
                    results[name].append(f.result())
                    print(f"{name} seed {seed}: " + " ".join(f"{x:.2f}" for x in results[name][-1]), flush=True)
    args.out.write_text(report(results, args.seeds, started))
    print(json.dumps({k: [passes(m) for m in v].count(False) for k, v in results.items()}), "runs failing per setting")


if __name__ == "__main__":
    main()
