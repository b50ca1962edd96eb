"""The pools experiment's solver on CPU: a tiny model taught the action format on the easiest
instances, so that it scores above 0 where the flywheel starts and has something to climb.

What it is, exactly: SmolLM2's architecture and tokenizer shrunk to a toy size (``PolicySpec``),
random weights, then ``steps`` supervised steps on the reference solutions of the families'
easiest instances (difficulty ``min_difficulty`` .. ``min_difficulty + levels - 1``), each as
the one fenced command the solver loop expects, on seeds of their own range (never a pool's or
the held-out set's). It is the word policy of the training tests grown to a family: it learns to
answer in the family's command shape and to copy a little from the instruction, imperfectly;
harder instances (more words, more files) it has never seen. Why not a real model: SmolLM2-135M
scores 0 on every task here (no group has a reward spread) and one update takes ~20 s on these
cores, so nothing could be measured in an hour; pointing the experiment's ``model`` at a real
model folder skips this bootstrap.

It is also taught the ``parametric`` proposer's prompt (``proposer_contexts``): contexts drawn at
random, each answered ``difficulty: N`` once for every N in the family's range, so it starts with
the answer's format and no preference among difficulties (which one earns r_P is for RL to find).
These examples come in batches of their own next to the solver's, which are drawn as before; every
arm starts from this one policy, so the arms stay paired.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from pathlib import Path

from aes_lib import families
from aes_lib.agents.limits import LoopLimits
from aes_lib.agents.proposer import parametric_prompt

BOOTSTRAP_SEEDS = 1 << 36
"""The bootstrap's instances' seeds start here: above the pools' (below 2**31), below the held-out set's (2**40)."""


@dataclasses.dataclass(frozen=True)
class PolicySpec:
    """The toy model and its supervised start."""

    hidden_size: int = 128
    layers: int = 2
    heads: int = 4
    examples: int = 512
    """Distinct bootstrap instances (spread over the families)."""
    levels: int = 2
    """Difficulty levels from each family's easiest that the bootstrap shows."""
    proposer_contexts: int = 16
    """Parametric proposer prompts, each taught with every answer in its range (0: a solver-only policy)."""
    near_miss_share: float = 0.0
    """Share of solver examples answered with the family's ``near_miss`` instead of its reference
    solution (where it has one): the start then holds a choice that RL can settle."""
    steps: int = 600
    lr: float = 3e-3
    batch: int = 8
    """Solver examples per step (and as many proposer examples)."""
    seed: int = 0
    limits: tuple[LoopLimits, ...] = (LoopLimits(),)
    """The limits of the attempts that will sample it (training, calibration): the solver's prompt
    states them, and a toy policy only answers the prompts it was taught. Examples take them in turn."""


def solver_prompt_ids(tokenizer, instruction: str, limits: LoopLimits = LoopLimits()) -> list[int]:
    """The prompt the solver sends for ``instruction`` under ``limits``, as the engine tokenizes it."""
    from aes_lib.agents.protocol import FencedProtocol
    from aes_lib.agents.solver_prompt import solver_messages, system_prompt
    from aes_lib.models.engine import chat_prompt_ids

    return chat_prompt_ids(tokenizer, solver_messages(system_prompt(FencedProtocol(), limits), instruction))


def examples(names: list[str], spec: PolicySpec) -> list[tuple[str, str]]:
    """(instruction, reply) pairs: each family's lesson (``Family.lesson``: the reference solution
    or, for ``near_miss_share`` of them, the near miss) as one fenced command."""
    rng = random.Random(f"bootstrap/{spec.seed}")
    miss_rng = random.Random(f"bootstrap-near-miss/{spec.seed}")  # leaves the instances' draws as they were
    fams = [families.get(n) for n in names]
    out = []
    for i in range(spec.examples):
        instruction, command = fams[i % len(fams)].lesson(BOOTSTRAP_SEEDS + i, spec.levels, spec.near_miss_share,
                                                          rng, miss_rng)
        out.append((instruction, f"```bash\n{' && '.join(command.splitlines())}\n```"))
    return out


def proposer_examples(names: list[str], spec: PolicySpec) -> list[tuple[list[dict[str, str]], str]]:
    """(messages, reply) pairs of the parametric proposer: a random parent difficulty and pass rate
    and the planner's direction for it, answered with each difficulty of the range (a uniform target)."""
    rng = random.Random(f"bootstrap-proposer/{spec.seed}")
    fams = [families.get(n) for n in names]
    out = []
    for i in range(spec.proposer_contexts):
        f = fams[i % len(fams)]
        pass_rate = None if rng.random() < 0.25 else round(rng.random(), 2)
        direction = "new" if pass_rate is None else "easier" if pass_rate < 0.5 else "harder"
        msgs = parametric_prompt.messages(f, rng.randint(f.min_difficulty, f.max_difficulty), direction, pass_rate)
        out += [(msgs, parametric_prompt.answer(d)) for d in range(f.min_difficulty, f.max_difficulty + 1)]
    return out


def bootstrap(base: Path, dest: Path, names: list[str], spec: PolicySpec = PolicySpec(), device: str = "cpu") -> Path:
    """Write the bootstrapped policy (a transformers folder) to ``dest``; ``base`` gives the
    architecture and tokenizer (SmolLM2's). ``device``: where the steps run (the same draws on
    any: the batches are chosen on the CPU)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from aes_lib.models.engine import chat_prompt_ids

    tok = AutoTokenizer.from_pretrained(base)
    cfg = AutoConfig.from_pretrained(base)
    cfg.update({"hidden_size": spec.hidden_size, "intermediate_size": 2 * spec.hidden_size,
                "num_hidden_layers": spec.layers, "num_attention_heads": spec.heads,
                "num_key_value_heads": max(1, spec.heads // 2), "head_dim": spec.hidden_size // spec.heads})
    torch.manual_seed(spec.seed)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).to(device)

    def reply_ids(reply: str) -> list[int]:
        return tok.encode(reply, add_special_tokens=False) + [tok.eos_token_id]

    seqs = [(solver_prompt_ids(tok, instruction, spec.limits[i % len(spec.limits)]), reply_ids(reply))
            for i, (instruction, reply) in enumerate(examples(names, spec))]
    solver = len(seqs)
    seqs += [(chat_prompt_ids(tok, msgs), reply_ids(reply)) for msgs, reply in proposer_examples(names, spec)]
    width = max(len(p) + len(r) for p, r in seqs)
    ids = torch.full((len(seqs), width), tok.eos_token_id)
    labels = torch.full((len(seqs), width), -100)
    for i, (p, r) in enumerate(seqs):
        ids[i, : len(p) + len(r)] = torch.tensor(p + r)
        labels[i, len(p): len(p) + len(r)] = torch.tensor(r)
    ids, labels = ids.to(device), labels.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=spec.lr)
    gen = torch.Generator().manual_seed(spec.seed)
    proposer_gen = torch.Generator().manual_seed(spec.seed + 1)  # leaves the solver's draws as they were
    model.train()
    for _ in range(spec.steps):
        rows = torch.randperm(solver, generator=gen)[: spec.batch]
        if len(seqs) > solver:
            rows = torch.cat([rows, solver + torch.randperm(len(seqs) - solver, generator=proposer_gen)[: spec.batch]])
        rows = rows.to(device)
        # Logits at the reply's positions only: the full vocabulary at every prompt token
        # would cost ~50x more. Position t predicts token t + 1.
        mask = labels[rows, 1:] != -100
        hidden = model.model(input_ids=ids[rows]).last_hidden_state[:, :-1][mask]
        loss = torch.nn.functional.cross_entropy(model.lm_head(hidden), labels[rows, 1:][mask])
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.save_pretrained(dest)
    tok.save_pretrained(dest)
    (dest / RECIPE).write_text(json.dumps(recipe(names, spec)))
    return dest


RECIPE = "bootstrap.json"
"""What a bootstrapped folder was made from (``recipe``), written beside its weights."""


def recipe(names: list[str], spec: PolicySpec) -> dict:
    """The families, the spec, and a digest of the examples taught: a family whose instructions or
    solutions changed makes a different recipe, so a folder taught the old text is not reused."""
    taught = hashlib.sha256(json.dumps(examples(names, spec)).encode()).hexdigest()
    return json.loads(json.dumps({"families": list(names), "spec": dataclasses.asdict(spec),
                                  "examples_sha256": taught}))  # as read back


def made_from(folder: Path, names: list[str], spec: PolicySpec) -> bool:
    """Whether ``folder`` holds a bootstrap made from ``names`` and ``spec``."""
    try:
        return json.loads((folder / RECIPE).read_text()) == recipe(names, spec) and (folder / "config.json").is_file()
    except (OSError, ValueError):
        return False
