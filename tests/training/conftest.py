"""Fixtures of the training-loop tests.

- ``word_policy``: the tiny model vLLM accepts (one policy for both engines, built once per
  run), taught the solver's action format by a few seconds of supervised steps: to any task it
  answers one fenced ``echo WORD > /app/answer.txt`` with WORD drawn uniformly from ``WORDS``.
  Which word earns the reward it must learn.
- ``TASKS``: the fixture tasks (``word-banana``, ``word-banana-alt``: the family the
  word policy learns; ``coin``: a random verifier for loop mechanics).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from built_once import built_once

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "flywheel"))  # flywheel_helpers

collect_ignore = ["tasks"]  # the fixture tasks' own test_*.py run inside containers only
TASKS = Path(__file__).resolve().parent / "tasks"
WORDS = ("banana", "cherry")
SFT_STEPS = 400
"""At 200 (each reply ~0.48, the words within 0.5%) DPPO at lr 5e-4 broke the format within
five updates in one of four runs (reward 0 from then on); 400 has never done so."""


WORD_WAVES = {"max_turns": 1, "max_tokens": 32}
"""The training settings of every test that samples the word policy: the prompt it is taught
states them (``LoopLimits.prompt``), so its attempts must run under them."""


def solver_prompt_ids(tokenizer, task: Path) -> list[int]:
    """The prompt a training attempt on ``task`` sends under ``WORD_WAVES``, as the engine tokenizes it."""
    from aes_lib.bundle import Task
    from aes_lib.flywheel.training import TrainingConfig
    from aes_lib.sandbox.trial import agent_timeout
    from aes_ops import bootstrap_policy
    from aes_services.training import training_limits

    limits = training_limits(TrainingConfig(**WORD_WAVES)).within(agent_timeout(Task.load(task)))
    return bootstrap_policy.solver_prompt_ids(tokenizer, (task / "instruction.md").read_text(), limits)


@pytest.fixture(scope="session")
def word_policy(vllm_tiny_model, tmp_path_factory) -> Path:
    return built_once(tmp_path_factory, "word", lambda folder: _teach_words(vllm_tiny_model, folder / "model"))


def _teach_words(base: Path, dest: Path) -> Path:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    prompts = [solver_prompt_ids(tok, TASKS / t) for t in ("word-banana", "word-banana-alt")]
    replies = [tok.encode(f"```bash\necho {w} > /app/answer.txt\n```", add_special_tokens=False) + [tok.eos_token_id]
               for w in WORDS]
    seqs = [(p, r) for p in prompts for r in replies]
    width = max(len(p) + len(r) for p, r in seqs)
    ids = torch.full((len(seqs), width), tok.eos_token_id)
    labels = torch.full((len(seqs), width), -100)
    for i, (p, r) in enumerate(seqs):
        ids[i, : len(p) + len(r)] = torch.tensor(p + r)
        labels[i, len(p): len(p) + len(r)] = torch.tensor(r)
    mask = labels[:, 1:] != -100  # position t predicts token t + 1; only reply tokens are trained
    targets = labels[:, 1:][mask]
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    torch.manual_seed(0)
    for _ in range(SFT_STEPS):
        hidden = model.model(input_ids=ids).last_hidden_state[:, :-1][mask]
        loss = torch.nn.functional.cross_entropy(model.lm_head(hidden), targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.save_pretrained(dest)
    tok.save_pretrained(dest)
    return dest
