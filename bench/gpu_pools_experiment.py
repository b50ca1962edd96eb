"""The pools experiment (``aes experiment pools``) in one process, for a lent GPU.

Three arms from one starting policy, per seed, under the same training rollouts:

* ``static``: a fixed pool, uniform over the families' difficulty range (``aes_ops.pools.static_pool``);
* ``flywheel``: starts from each family's easiest (``pools.flywheel_start``); every round the pool is
  reviewed (k solver attempts per instance, retired out of the calibration band, as the pool
  review does), then parents are picked farthest from the band centre first (the planner's order),
  each child moved a difficulty step by the parent's observed pass rate (``planner.direction``,
  ``families.moved``: easier when it fails, harder when it is solved), calibrated with
  ``CalibrationRule`` (4 attempts, 8 near a band edge) and admitted in the band [0.25, 0.75];
  a full pool drops its oldest (``flywheel.pool.admit``'s rule);
* ``both``: the flywheel with the policy choosing each child's difficulty (one line
  ``difficulty: N``, the parametric proposer mode's answer), a group of proposals per parent,
  trained on r_P (1 admitted, ``CalibrationRule.partial_reward`` valid out of band, 0 broken).

What runs where, and what is the project's: the task families (instances, instructions,
reference solutions, tests: ``aes_lib.families``), the pools and the held-out set
(``aes_ops.pools``: ``heldout`` instances never meet a pool, ``signal_fraction``), the solver's
system prompt (``aes_lib.agents.solver_prompt``) and its reply parser (``agents.parse``), the
starting policy (``aes_ops.bootstrap_policy.bootstrap``: SmolLM2's architecture shrunk, random
weights, supervised steps on the easiest instances' reference solutions, here with the
proposer's answers added; the same policy for every arm), the calibration rule, the planner's
direction, the review's band test, the learner's advantages (``centred``) and DPPO loss (the torch
reference, ``aes_kernels.reference``), the t and Wilson intervals. What is this script's: batched
sampling with ``generate`` (one turn, as ``max_turns = 1`` in bench/pools_experiment.toml), one
DPPO step per wave on the groups with a reward spread (and one per round on the proposer groups;
the sampler's log-probs are recomputed by a forward pass, the weights being the same), and the
scorer.

The scorer is **an in-process scorer, not the project's Docker verifier**: the reply's fenced
command runs with bash (as uid 65534 when root and ``setpriv`` is there; 5 s cap, no stdin) in a
fresh temp directory, with ``/app`` rewritten to it in the command and in the family's tests;
then the tests' functions are called in this process (each parametrized case once; pytest is
imported for its marks, not run) and the reward is passed / collected, as the managed verifier
computes it. A command already scored on the same instance is not run
again (the scorer is a function of the command on an empty directory; a command that reads the
clock or ``$RANDOM`` would be scored once).

Without msgspec, nats, docker, tomli_w or httpx (the lent GPU machine has the ML stack only), the
modules above are loaded without the packages' bus-facing ``__init__``s, and the bus contract
(``aes_proto.messages``, ``aes_proto.records``), which they name only in annotations, is stood in
for (``_stand_in_bus_layer``). The tokenizer and the architecture come from a transformers folder
without weights (``--base``): the bundled SmolLM2's config and tokenizer, 3.5 MB, exported here
with ``--export-base DIR`` and carried (bench/gpu_pools_experiment.sh).

Run: ``bash bench/gpu_pools_experiment.sh`` on a lent H200 (under ~8 minutes: seeds are run one
after another until ``--budget-s``, then the report says how many ran). Dry run here:
``python bench/gpu_pools_experiment.py --device cpu --tiny`` (writes to the temp folder unless
``--out`` is given). Not run on a GPU yet: the session that wrote it had none lent.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import datetime
import functools
import importlib
import json
import os
import platform
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _p in ("kernels", "proto", "services", "libs"):
    if str(ROOT / _p) not in sys.path:
        sys.path.insert(0, str(ROOT / _p))

BUS_PACKAGES = ("msgspec", "nats", "docker", "tomli_w", "httpx")
"""What the project's package ``__init__``s need beyond torch and transformers."""


def _package(name: str, folder: Path) -> types.ModuleType:
    """``name`` as a package whose ``__init__`` is not run: its submodules import on their own."""
    mod = types.ModuleType(name)
    mod.__path__ = [str(folder)]
    sys.modules[name] = mod
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(importlib.import_module(parent), child, mod)
    return mod


def _annotation_names(name: str) -> None:
    """A stand-in for a msgspec module whose types the loaded modules name only in annotations
    (or as defaults never used here): every attribute is an empty class of that name."""
    def named(attr: str) -> type:
        if attr.startswith("__"):  # module protocol (__file__, __path__...): absent, as a module's would be
            raise AttributeError(attr)
        return type(attr, (), {"__module__": name})

    mod = types.ModuleType(name)
    mod.__getattr__ = named  # type: ignore[method-assign]
    sys.modules[name] = mod


def _stand_in_bus_layer() -> None:
    _package("aes_proto", ROOT / "proto/aes_proto")
    for name in ("aes_proto.messages", "aes_proto.records"):
        _annotation_names(name)
    _package("aes_lib.models", ROOT / "libs/aes_lib/models")  # engine.py and prices.py alone
    fam = _package("aes_lib.families", ROOT / "libs/aes_lib/families")  # all but render (bundles, Docker)
    from aes_lib.families import base, moves, registry

    for attr in ("Family", "FamilyError", "FamilyParamsError", "Instance", "Params", "TaskSpec", "UnknownFamilyError"):
        setattr(fam, attr, getattr(base, attr))
    fam.get, fam.names, fam.moved = registry.get, registry.names, moves.moved


try:
    for _m in BUS_PACKAGES:
        importlib.import_module(_m)
    IMPORTS = "the full install"
except ImportError as _missing:
    _stand_in_bus_layer()
    IMPORTS = f"the bus layer stood in for ({_missing.name} is missing)"

import torch  # noqa: E402

from aes_kernels.reference import dppo_loss_reference, token_logprobs_reference  # noqa: E402
from aes_lib import families  # noqa: E402
from aes_lib.agents.parse import parse_action  # noqa: E402
from aes_lib.agents.proposer import parametric_prompt  # noqa: E402
from aes_lib.families import Instance, Params  # noqa: E402
from aes_lib.flywheel import controls, readouts  # noqa: E402
from aes_lib.flywheel.calibration import CalibrationRule  # noqa: E402
from aes_lib.flywheel.planner import direction  # noqa: E402
from aes_lib.flywheel.pool import out_of_band  # noqa: E402
from aes_lib.flywheel.readouts import COMPARISONS, ENDPOINTS  # noqa: E402
from aes_lib.learner.advantages import centred, has_signal  # noqa: E402
from aes_ops import bootstrap_policy, pools, power  # noqa: E402
from aes_ops.evaluation import t_interval  # noqa: E402

ARMS = ("static", "weighted", "oracle", "flywheel", "blind", "both")
"""``static``: a fixed pool sampled uniformly; ``weighted``: the same pool, each instance weighted
down to ``buffer_weight`` once its last group all passed or all failed (prime-rl's buffer idea:
easy and hard problems are sampled less); ``oracle``: no pool, each wave's groups drawn fresh at the
true frontier, read from the held-out set (the positive control: it must beat ``static`` before
any flywheel number is read); ``flywheel``: the planner's direction; ``blind``: the flywheel's
rounds and calibration spend with a random direction (the no-feedback ablation); ``both``: the
flywheel with the policy choosing difficulties, its proposer updates on an optimizer of their own."""
APP = re.compile(r"(?<![\w./-])/app(?![\w.-])")
"""The task's working directory in the image, as the commands and the tests name it."""
COMMAND_TIMEOUT_S = 5.0


@dataclasses.dataclass(frozen=True)
class Shape:
    """One experiment's size: bench/pools_experiment.toml's keys, and the lent machine's batch."""

    families: tuple[str, ...] = ("echo-words", "pick-first")
    max_difficulty: int = 4
    seeds: int = 8
    first_seed: int = 0
    """Seeds run are ``first_seed`` onwards: a powered run starts past its pilots' seeds."""
    arms: tuple[str, ...] = ARMS
    waves: int = 16
    waves_per_round: int = 2
    eval_every: int = 4
    groups_per_wave: int = 16
    group_size: int = 8
    heldout_per_difficulty: int = 16
    """4 difficulties x 16 = 64 held-out instances."""
    eval_k: int = 4
    static_pool_size: int = 16
    """Also the flywheel's pool capacity, as in ``aes experiment pools``."""
    start_per_family: int = 4
    assignments_per_round: int = 8
    """Children calibrated per round; ``both`` makes them as groups of ``proposals`` per parent."""
    proposals: int = 4
    max_tokens: int = 40
    temperature: float = 0.5
    """Of training and of the held-out attempts, as in bench/pools_experiment.toml (its part 5)."""
    lr: float = 5e-4
    batch: int = 512
    """Prompts per ``generate`` call."""
    policy: bootstrap_policy.PolicySpec = bootstrap_policy.PolicySpec(near_miss_share=0.5)
    """The project's bootstrap policy, shown echo-words' near miss in half its examples as
    bench/pools_experiment.toml's is."""
    buffer_weight: float = controls.BUFFER_WEIGHT
    """``weighted``: an instance's sampling weight once its last group had no spread (1 otherwise)."""
    frontier_every: int = 2
    """``oracle``: waves between two readings of the held-out pass rate per difficulty."""
    endpoint: str = "final"
    """What the read-outs and the gate compare per run: one of ``readouts.ENDPOINTS``."""
    batch_groups: int = 0
    """0: one update per wave on every group with a spread (issue 48's matching of optimizer steps);
    N: the services' learner's rule, one update per N groups with a spread, a wave's remainder
    carried to the next with its sampling-time log-probs. Pilot 9: under the first, five times the
    signal groups learned no more (Adam's step does not grow with the batch)."""


LADDER = Shape(families=("ladder",), max_difficulty=0, seeds=12, arms=("static", "oracle", "weighted", "flywheel",
                                                                        "blind"),
                waves=16, groups_per_wave=8, group_size=8, heldout_per_difficulty=8, eval_k=2, static_pool_size=40,
                start_per_family=4, max_tokens=80, frontier_every=4,
                lr=2e-4, endpoint="curve", policy=bootstrap_policy.PolicySpec(examples=1024, levels=2, steps=800,
                                                                     near_miss_share=0.65))
"""The ladder (issue 48): 10 difficulties, each one more step the start has seen both ways (right
in 35% of its examples), all or nothing; the start solves difficulties 1-2. The static pool holds
4 instances per difficulty. lr 2e-4: 5e-4 broke the policy within two updates (pilot 7). Read on the
learning curve: in pilots 5 and 6 a static run that learned the ladder ended near 0.9, where the
last point cannot tell a faster climb (bench/results/ladder_pilot.md)."""

TINY = Shape(max_difficulty=2, seeds=2, waves=2, waves_per_round=1, eval_every=2, groups_per_wave=2, group_size=4,
             heldout_per_difficulty=1, eval_k=2, static_pool_size=4, start_per_family=2, assignments_per_round=2,
             proposals=2, batch=64,
             policy=bootstrap_policy.PolicySpec(hidden_size=64, examples=8, levels=1, steps=80, batch=4))


SHAPES = {"default": Shape(), "tiny": TINY, "ladder": LADDER}


def say(line: str) -> None:
    print(line, flush=True)


# -- the policy ---------------------------------------------------------------------------


@dataclasses.dataclass
class Policy:
    model: torch.nn.Module
    tok: object
    opt: torch.optim.Optimizer
    proposer_opt: torch.optim.Optimizer
    """The proposer role's updates keep their own moments, off the solver's optimizer state."""
    device: str
    updates: int = 0


@dataclasses.dataclass(frozen=True)
class Sample:
    """One sampled reply: the prompt's and the completion's token ids, its text."""

    prompt: list[int]
    completion: list[int]
    text: str


def start_policy(base: Path, shape: Shape, dest: Path, device: str) -> Path:
    """The supervised start every arm shares (written once under ``dest``, reused when ``dest``
    holds one made from the same recipe): the solver's examples and the parametric proposer's
    prompt, as ``aes experiment pools`` teaches them."""
    names = list(shape.families)
    if bootstrap_policy.made_from(dest, names, shape.policy):
        return dest
    if dest.is_dir() and any(dest.iterdir()):
        raise SystemExit(f"{dest} holds something other than this shape's bootstrap "
                         f"({bootstrap_policy.RECIPE} differs or is missing): name an empty folder")
    bootstrap_policy.bootstrap(base, dest, names, shape.policy, device=device)
    return dest


ADAMW = {"weight_decay": 0.0, "eps": 1e-8}
"""The learner's AdamW settings (``LearnerConfig``'s defaults; a test holds them equal): torch's
own default decays weights by 0.01 a step, which the services' learner does not."""


def load_policy(folder: Path, device: str, lr: float) -> Policy:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).to(device)
    return Policy(model, AutoTokenizer.from_pretrained(folder), torch.optim.AdamW(model.parameters(), lr=lr, **ADAMW),
                  torch.optim.AdamW(model.parameters(), lr=lr, **ADAMW), device)


@torch.no_grad()
def sample(policy: Policy, prompts: list[list[int]], max_tokens: int, temperature: float, seed: int,
           batch: int) -> list[Sample]:
    """One completion per prompt, sampled from the full distribution, in batches (left-padded);
    ``seed`` fixes the draws, so two arms of a seed sample alike where their policies agree."""
    torch.manual_seed(seed)
    eos = policy.tok.eos_token_id
    policy.model.eval()
    out: list[Sample] = []
    for i in range(0, len(prompts), batch):
        chunk = prompts[i:i + batch]
        width = max(map(len, chunk))
        ids = torch.full((len(chunk), width), eos, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for r, p in enumerate(chunk):
            ids[r, width - len(p):] = torch.tensor(p)
            mask[r, width - len(p):] = 1
        gen = policy.model.generate(input_ids=ids.to(policy.device), attention_mask=mask.to(policy.device),
                                    do_sample=True, temperature=temperature, top_k=0, top_p=1.0,
                                    max_new_tokens=max_tokens, pad_token_id=eos, eos_token_id=eos)
        for p, row in zip(chunk, gen[:, width:].tolist()):
            completion = row[: row.index(eos) + 1] if eos in row else row
            out.append(Sample(p, completion, policy.tok.decode(completion, skip_special_tokens=True)))
    return out


def _completion_logprobs(policy: Policy, samples: Sequence[Sample]) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-prob of every completion token (flat) and each token's sample index."""
    width = max(len(s.prompt) + len(s.completion) for s in samples)
    eos = policy.tok.eos_token_id
    ids = torch.full((len(samples), width), eos, dtype=torch.long)
    target = torch.zeros_like(ids, dtype=torch.bool)
    for r, s in enumerate(samples):
        seq = s.prompt + s.completion
        ids[r, : len(seq)] = torch.tensor(seq)
        target[r, len(s.prompt): len(seq)] = True
    ids, target = ids.to(policy.device), target.to(policy.device)
    # Hidden states at the positions that predict a completion token (position t predicts t + 1):
    # the full vocabulary at every prompt position would cost ~10x more.
    hidden = policy.model.model(input_ids=ids).last_hidden_state[:, :-1][target[:, 1:]]
    logp = token_logprobs_reference(hidden, policy.model.lm_head.weight, ids[:, 1:][target[:, 1:]])
    rows = torch.arange(len(samples), device=policy.device)[:, None].expand_as(target)[:, 1:][target[:, 1:]]
    return logp, rows


@torch.no_grad()
def sampling_logprobs(policy: Policy, samples: Sequence[Sample]) -> list[torch.Tensor]:
    """Each sample's completion log-probs under the current weights (what the sampler saw)."""
    logp, rows = _completion_logprobs(policy, samples)
    return [logp[rows == r] for r in range(len(samples))]


def dppo_step(policy: Policy, samples: Sequence[Sample], advantages: Sequence[float],
              opt: torch.optim.Optimizer | None = None, mu: torch.Tensor | None = None) -> float:
    """One DPPO update on ``samples`` with per-sample advantages (``opt``: the solver's by
    default; ``mu``: the sampler's log-probs, flat in sample order, where the weights have moved
    since; else recomputed, the weights being the sampler's); returns the loss."""
    opt = opt or policy.opt
    policy.model.train()
    if mu is None:
        with torch.no_grad():
            mu, _ = _completion_logprobs(policy, samples)
    logp, rows = _completion_logprobs(policy, samples)
    adv = torch.tensor([float(a) for a in advantages], device=policy.device)[rows]
    out = dppo_loss_reference(logp, mu, adv, torch.ones_like(logp))
    opt.zero_grad()
    out.loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.model.parameters(), 1.0)
    opt.step()
    policy.updates += 1
    return out.loss.item()


# -- the scorer ---------------------------------------------------------------------------


def unit_checks(tests: str) -> list[Callable[[], None]]:
    """The test file's tests, each parametrized case as its own call (what pytest collects)."""
    space: dict[str, object] = {"__name__": "test_task"}
    exec(compile(tests, "test_task.py", "exec"), space)  # noqa: S102 -- the family's own tests
    checks: list[Callable[[], None]] = []
    for name, fn in space.items():
        if not (name.startswith("test_") and callable(fn)):
            continue
        marks = [m for m in getattr(fn, "pytestmark", []) if m.name == "parametrize"]
        if not marks:
            checks.append(fn)  # type: ignore[arg-type]
            continue
        argname, values = marks[0].args[:2]
        if len(marks) > 1 or "," in argname:
            raise ValueError(f"{name}: only one parametrized argument is supported by this scorer")
        checks += [functools.partial(fn, **{argname: v}) for v in values]  # type: ignore[arg-type]
    return checks


def _run_command(command: str, workdir: Path) -> None:
    """``command`` with bash in ``workdir``; as nobody when root (it came from a sampled policy)."""
    as_root = os.geteuid() == 0 and shutil.which("setpriv")
    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if as_root else []
    proc = subprocess.Popen([*drop, "bash", "-c", command], cwd=workdir, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(workdir), "LC_ALL": "C"})
    try:
        proc.wait(timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def score_command(tests: str, command: str) -> float:
    """passed / collected of ``tests`` after ``command`` ran in a fresh directory standing for /app."""
    workdir = Path(tempfile.mkdtemp(prefix="aes-pools-"))
    try:
        workdir.chmod(0o777)
        _run_command(APP.sub(str(workdir), command), workdir)
        checks = unit_checks(APP.sub(str(workdir), tests))
        passed = 0
        for check in checks:
            try:
                check()
                passed += 1
            except Exception:  # noqa: BLE001 -- a failing check, whatever it raised
                pass
        return passed / len(checks) if checks else 0.0
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def check_scorer(shape: Shape) -> None:
    """RuntimeError unless each family's reference solution scores 1 and doing nothing 0 on this
    machine: a scorer that silently failed (no bash, a refused ``setpriv``) would read as a
    policy that learns nothing."""
    for name in shape.families:
        task = spec(Instance(name, Params(families.get(name).min_difficulty + 1, 0)))
        got = score_command(task.tests, " && ".join(task.solution.splitlines())), score_command(task.tests, "true")
        if got != (1.0, 0.0):
            raise RuntimeError(f"{name}: the scorer gives the reference solution {got[0]} and doing nothing "
                               f"{got[1]} (expected 1 and 0) on this machine")


class Scorer:
    """Rewards of replies to instances; a command is run once per instance."""

    def __init__(self, workers: int) -> None:
        self.pool = concurrent.futures.ThreadPoolExecutor(workers)
        self.known: dict[tuple[Instance, str], float] = {}
        self.runs = 0

    def rewards(self, instances: Sequence[Instance], replies: Sequence[str]) -> list[float]:
        commands = [parse_action(r).command for r in replies]
        todo = {(i, c) for i, c in zip(instances, commands) if c and (i, c) not in self.known}
        futures = {key: self.pool.submit(score_command, spec(key[0]).tests, key[1]) for key in todo}
        for key, fut in futures.items():
            self.known[key] = fut.result()
        self.runs += len(todo)
        return [self.known[(i, c)] if c else 0.0 for i, c in zip(instances, commands)]


@functools.cache
def spec(i: Instance) -> families.TaskSpec:
    return families.get(i.family).instance(i.params)


@functools.cache
def solver_prompt(tok, i: Instance) -> tuple[int, ...]:
    return tuple(bootstrap_policy.solver_prompt_ids(tok, spec(i).instruction))


# -- one run ------------------------------------------------------------------------------


@dataclasses.dataclass
class Run:
    arm: str
    seed: int
    heldout: list[float] = dataclasses.field(default_factory=list)
    """Held-out mean reward (mean over instances of each one's mean over k) at each point."""
    by_difficulty: list[dict[str, float]] = dataclasses.field(default_factory=list)
    """Held-out mean reward per ``<family>/d<difficulty>`` at each point."""
    frontier: list[int] = dataclasses.field(default_factory=list)
    """``oracle``: the difficulty each reading of the held-out set put the frontier at (first family)."""
    updates_at: list[int] = dataclasses.field(default_factory=list)
    """Policy updates (solver and proposer) made before each point."""
    groups: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    proposer_reward: list[float] = dataclasses.field(default_factory=list)
    """Mean r_P of each round's proposals (``both``)."""
    trained_difficulty: list[float] = dataclasses.field(default_factory=list)
    selection_rollouts: int = 0
    admitted: int = 0
    retired: int = 0
    broken: int = 0
    empty_waves: int = 0
    updates: int = 0
    wall_s: float = 0.0


class Experiment:
    """Everything one arm of one seed needs: the shape, the scorer, the held-out set."""

    def __init__(self, shape: Shape, policy_dir: Path, device: str, scorer: Scorer) -> None:
        self.shape, self.policy_dir, self.device, self.scorer = shape, policy_dir, device, scorer
        self.rule = CalibrationRule()
        self.held = pools.heldout(list(shape.families), shape.heldout_per_difficulty, shape.max_difficulty)

    def attempts(self, policy: Policy, instances: Sequence[Instance], seed: int) -> tuple[list[Sample], list[float]]:
        """One solver attempt at each of ``instances`` (repeat an instance for a group): replies, rewards."""
        prompts = [list(solver_prompt(policy.tok, i)) for i in instances]
        replies = sample(policy, prompts, self.shape.max_tokens, self.shape.temperature, seed, self.shape.batch)
        return replies, self.scorer.rewards(instances, [r.text for r in replies])

    def heldout_rates(self, policy: Policy, seed: int) -> tuple[list[float], dict[str, float]]:
        """Each held-out instance's mean over ``eval_k`` attempts, and their mean per difficulty."""
        k = self.shape.eval_k
        flat = [i for i in self.held for _ in range(k)]
        _, rewards = self.attempts(policy, flat, seed=seed)
        per_task = [statistics.fmean(rewards[j * k:(j + 1) * k]) for j in range(len(self.held))]
        level: dict[str, list[float]] = {}
        for inst, r in zip(self.held, per_task):
            level.setdefault(f"{inst.family}/d{inst.params.difficulty}", []).append(r)
        return per_task, {key: statistics.fmean(v) for key, v in level.items()}

    def evaluate(self, policy: Policy, run: Run, point: int) -> None:
        per_task, by_level = self.heldout_rates(policy, _seed(run.seed, "eval", point))
        run.heldout.append(statistics.fmean(per_task))
        run.by_difficulty.append(by_level)
        run.updates_at.append(policy.updates)

    def run(self, arm: str, seed: int) -> Run:
        s, began = self.shape, time.monotonic()
        run = Run(arm, seed)
        policy = load_policy(self.policy_dir, self.device, s.lr)
        names = list(s.families)
        pool = (pools.static_pool(names, s.static_pool_size, seed, s.max_difficulty) if arm in ("static", "weighted")
                else [] if arm == "oracle" else pools.flywheel_start(names, s.start_per_family, seed))
        pools.disjoint(pool, self.held)
        seen: dict[Instance, list[float]] = {}  # latest solver rewards per instance: the planner's pass rate
        rng = random.Random(f"gpu-pools/{arm}/{seed}")
        self.pending: list[tuple[list[Sample], list[float], list[torch.Tensor]]] = []
        """``batch_groups``: groups with a spread not yet in an update (replies, advantages, mu)."""
        self.evaluate(policy, run, 0)
        for wave in range(1, s.waves + 1):
            if arm == "oracle" and (wave - 1) % s.frontier_every == 0:
                frontier = self.frontier(policy, run, wave)
            picked = (self.at_frontier(frontier, rng) if arm == "oracle"
                      else self.weighted_pick(pool, seen, rng) if arm == "weighted" else self.uniform_pick(pool, rng))
            self.wave(policy, run, picked, seen, wave)
            if arm in ("flywheel", "blind", "both") and wave % s.waves_per_round == 0 and wave < s.waves:
                pool = self.round(policy, run, pool, seen, rng, wave)
            if wave % s.eval_every == 0 or wave == s.waves:
                self.evaluate(policy, run, wave)
        run.updates, run.wall_s = policy.updates, time.monotonic() - began
        return run

    def uniform_pick(self, pool: list[Instance], rng: random.Random) -> list[Instance]:
        """``groups_per_wave`` pool instances, uniform, without replacement while the pool allows
        (as the wave planner samples)."""
        return _cycle(rng.sample(pool, len(pool)), self.shape.groups_per_wave) if pool else []

    def weighted_pick(self, pool: list[Instance], seen: dict, rng: random.Random) -> list[Instance]:
        """As ``uniform_pick``, each instance weighted ``buffer_weight`` where its last group all
        passed or all failed (``controls.weighted_order``, as the wave planner samples)."""
        weight = controls.buffer_weights(seen, self.shape.buffer_weight)
        order = controls.weighted_order(pool, lambda i: weight.get(i, 1.0), rng)
        return _cycle(order, self.shape.groups_per_wave) if pool else []

    def frontier(self, policy: Policy, run: Run, wave: int) -> dict[str, int]:
        """Per family, the lowest difficulty not yet mastered on the held-out set (``controls.frontier``):
        what the oracle trains on until its next reading. It is the evaluation just made where one
        was (every arm pays for that), else a reading of its own, counted with the selection
        rollouts."""
        if run.updates_at and run.updates_at[-1] == policy.updates:  # no update since the last evaluation
            by_level = run.by_difficulty[-1]
        else:
            _, by_level = self.heldout_rates(policy, _seed(run.seed, "frontier", wave))
            run.selection_rollouts += len(self.held) * self.shape.eval_k
        found = controls.frontier(by_level)
        run.frontier.append(found[self.shape.families[0]])
        return found

    def at_frontier(self, frontier: dict[str, int], rng: random.Random) -> list[Instance]:
        """``groups_per_wave`` fresh instances at each family's frontier, the families in turn."""
        return pools.at_frontier(frontier, self.shape.groups_per_wave, rng)

    def wave(self, policy: Policy, run: Run, picked: list[Instance], seen: dict, wave: int) -> None:
        """``group_size`` attempts at each of ``picked``; the update(s) on the groups with a spread
        (``Shape.batch_groups``)."""
        s = self.shape
        if not picked:
            run.empty_waves += 1
            return
        flat = [i for i in picked for _ in range(s.group_size)]
        replies, rewards = self.attempts(policy, flat, seed=_seed(run.seed, run.arm, "wave", wave))
        batch, advantages = [], []
        for g, inst in enumerate(picked):
            got = rewards[g * s.group_size:(g + 1) * s.group_size]
            run.groups[f"w{wave}g{g}"] = got
            seen[inst] = got
            if has_signal(got):
                batch += replies[g * s.group_size:(g + 1) * s.group_size]
                advantages += centred(got)
        run.trained_difficulty.append(statistics.fmean(i.params.difficulty for i in picked))
        if not s.batch_groups:
            if batch:
                dppo_step(policy, batch, advantages)
            return
        n = s.group_size
        mus = sampling_logprobs(policy, batch) if batch else []
        self.pending += [(batch[g:g + n], advantages[g:g + n], mus[g:g + n]) for g in range(0, len(batch), n)]
        while len(self.pending) >= s.batch_groups:
            take, self.pending = self.pending[:s.batch_groups], self.pending[s.batch_groups:]
            dppo_step(policy, [x for g in take for x in g[0]], [a for g in take for a in g[1]],
                      mu=torch.cat([m for g in take for m in g[2]]))

    def round(self, policy: Policy, run: Run, pool: list[Instance], seen: dict, rng: random.Random,
              wave: int) -> list[Instance]:
        """The pool review, then new children calibrated into the pool (the flywheel's round)."""
        kept, retired = self.review(policy, run, pool, seen, wave)
        # Parents as the planner picks them: farthest from the band centre first; from the
        # retired ones when the review emptied the pool.
        parents = sorted(kept or retired, key=lambda i: -abs(_rate(seen, i) - 0.5))
        if not parents:
            return kept
        if run.arm == "both":
            n = max(1, self.shape.assignments_per_round // self.shape.proposals)
            children, proposals = self.proposed(policy, run, _cycle(parents, n), seen, rng, wave)
        else:
            children = self.moved(_cycle(parents, self.shape.assignments_per_round), seen, rng,
                                  blind=run.arm == "blind")
            proposals = []
        decisions = iter(self.calibrate(policy, run, [c for c in children if c is not None], wave))
        r_p = []
        for child in children:
            d = next(decisions) if child is not None else None
            r_p.append(d.proposer_reward if d else 0.0)  # a broken proposal earns 0
            if d and d.outcome == "admitted" and child not in kept:
                kept = (kept + [child])[-self.shape.static_pool_size:]  # a full pool drops its oldest
                run.admitted += 1
        if proposals:
            run.proposer_reward.append(statistics.fmean(r_p))
            self.train_proposer(policy, proposals, r_p)
        return kept

    def review(self, policy: Policy, run: Run, pool: list[Instance], seen: dict,
               wave: int) -> tuple[list[Instance], list[Instance]]:
        """``initial_rollouts`` attempts at every pool instance; (kept, retired out of the band)."""
        k = self.rule.initial_rollouts
        if not pool:
            return [], []
        flat = [i for i in pool for _ in range(k)]
        _, rewards = self.attempts(policy, flat, seed=_seed(run.seed, run.arm, "review", wave))
        run.selection_rollouts += len(pool) * k
        means = {}
        for j, inst in enumerate(pool):
            seen[inst] = rewards[j * k:(j + 1) * k]
            means[str(j)] = statistics.fmean(seen[inst])
        gone = {int(j) for j in out_of_band(means, self.rule.band_low, self.rule.band_high)}
        run.retired += len(gone)
        return [i for j, i in enumerate(pool) if j not in gone], [i for j, i in enumerate(pool) if j in gone]

    def moved(self, parents: list[Instance], seen: dict, rng: random.Random,
              blind: bool = False) -> list[Instance | None]:
        """The procedural proposer: each parent easier or harder by its pass rate, or (``blind``)
        by a coin; the step is ``families.moved``'s (two from a parent with no spread)."""
        out: list[Instance | None] = []
        for p in parents:
            f = families.get(p.family)
            rate = _rate(seen, p, None)
            way = controls.coin(rng) if blind else direction(rate)
            out.append(Instance(p.family, families.moved(f, p.params, way, rng.randrange(pools.POOL_SEEDS), rate)))
        return out

    def proposed(self, policy: Policy, run: Run, parents: list[Instance], seen: dict, rng: random.Random,
                 wave: int) -> tuple[list[Instance | None], list[Sample]]:
        """The policy as proposer: ``proposals`` answers per parent; an answer that is not one of the
        family's difficulties is a broken proposal (None)."""
        from aes_lib.models.engine import chat_prompt_ids

        prompts = []
        for p in parents:
            f, rate = families.get(p.family), _rate(seen, p, None)
            ids = chat_prompt_ids(policy.tok, parametric_prompt.messages(f, p.params.difficulty, direction(rate), rate))
            prompts += [ids] * self.shape.proposals
        replies = sample(policy, prompts, parametric_prompt.MAX_TOKENS, self.shape.temperature,
                         _seed(run.seed, "propose", wave), self.shape.batch)
        children: list[Instance | None] = []
        for j, reply in enumerate(replies):
            parent = parents[j // self.shape.proposals]
            f = families.get(parent.family)
            try:
                chosen = parametric_prompt.parse(reply.text, f)
            except parametric_prompt.ParametricAnswerError:
                children.append(None)
                run.broken += 1
            else:
                children.append(Instance(f.name, Params(chosen, rng.randrange(pools.POOL_SEEDS))))
        return children, replies

    def calibrate(self, policy: Policy, run: Run, children: list[Instance], wave: int) -> list:
        """``CalibrationRule.decide`` on each child: its initial attempts, more near a band edge."""
        rewards: list[list[float]] = [[] for _ in children]
        for step in range(2):
            need = [(j, self.rule.rollouts_needed(r) - len(r)) for j, r in enumerate(rewards)]
            flat = [j for j, n in need for _ in range(n)]
            if not flat:
                break
            _, got = self.attempts(policy, [children[j] for j in flat],
                                   seed=_seed(run.seed, run.arm, "calibrate", wave, step))
            run.selection_rollouts += len(flat)
            for j, r in zip(flat, got):
                rewards[j].append(r)
        return [self.rule.decide(r, revision=0) for r in rewards]

    def train_proposer(self, policy: Policy, proposals: list[Sample], r_p: list[float]) -> None:
        """One update on the proposer groups (a parent's proposals) whose r_P differ."""
        n = self.shape.proposals
        batch, advantages = [], []
        for g in range(0, len(proposals), n):
            if has_signal(r_p[g:g + n]):
                batch += proposals[g:g + n]
                advantages += centred(r_p[g:g + n])
        if batch:
            dppo_step(policy, batch, advantages, policy.proposer_opt)


def _rate(seen: dict, i: Instance, unknown: float | None = 0.5) -> float | None:
    """The latest observed mean reward on ``i`` (the planner's pass rate)."""
    got = seen.get(i)
    return statistics.fmean(got) if got else unknown


def _cycle(items: list, n: int) -> list:
    return [items[j % len(items)] for j in range(n)]


def _seed(*parts: object) -> int:
    """A sampling seed from ``parts`` (stable across processes, unlike ``hash``)."""
    return random.Random("/".join(map(str, parts))).randrange(1 << 62)


# -- the report ---------------------------------------------------------------------------


def _ci(values: Sequence[float], bounds: tuple[float, float] | None = (0.0, 1.0)) -> str:
    ci = t_interval(values, bounds=bounds)
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "n/a"


def _points(shape: Shape) -> list[int]:
    return [0] + [w for w in range(1, shape.waves + 1) if w % shape.eval_every == 0 or w == shape.waves]


def report(shape: Shape, runs: list[Run], machine: str, seconds: float, scorer: Scorer, base: Path) -> str:
    """The markdown record: the setup, then held-out reward, paired gains, signal share, r_P, runs."""
    arms = [a for a in shape.arms if any(r.arm == a for r in runs)]
    seeds = sorted({r.seed for r in runs})
    by = {(r.arm, r.seed): r for r in runs}
    points = _points(shape)
    lines = [
        "# Pools experiment on one GPU, in process (bench/gpu_pools_experiment.py)", "",
        f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- machine: {machine}",
        f"- seeds run: {len(seeds)} of {shape.seeds} (the time budget stops starting new ones); "
        f"arms: {', '.join(arms)}; wall time {seconds:.0f} s",
        f"- shape: {shape}",
        f"- tokenizer and architecture from {base.name}/ (SmolLM2's, no weights); starting policy: "
        f"aes_ops.bootstrap_policy, the same for every arm",
        "- scorer: **in-process scorer, not the project's Docker verifier** (bash in a temp dir standing for "
        f"/app, the family's tests called in process; {scorer.runs} distinct commands run)",
        "", "## Held-out mean reward per arm", "",
        f"{len(pools.heldout(list(shape.families), shape.heldout_per_difficulty, shape.max_difficulty))} held-out "
        f"instances x {shape.eval_k} attempts; mean over seeds, 95% t interval over seeds. Sampling at each point is "
        "seeded by the seed, so the arms of a seed are paired.", "",
        "| arm | wave | training rollouts | updates (mean) | held-out mean reward | 95% CI |",
        "|---|---|---|---|---|---|",
    ]
    for arm in arms:
        for j, w in enumerate(points):
            mine = [by[(arm, s)] for s in seeds if (arm, s) in by]
            vals = [r.heldout[j] for r in mine]
            lines.append(f"| {arm} | {w} | {w * shape.groups_per_wave * shape.group_size} | "
                         f"{statistics.fmean(r.updates_at[j] for r in mine):.1f} | "
                         f"{statistics.fmean(vals):.3f} | {_ci(vals)} |")
    lines += ["", "## Gain over the static pool, paired by seed", "",
              "Per seed, the arm's held-out mean reward minus static's at the same point; mean and 95% t interval "
              "over seeds.", "", "| arm | wave | mean difference | 95% CI |", "|---|---|---|---|"]
    for arm in (a for a in arms if a != "static" and "static" in arms):
        for j, w in enumerate(points[1:], 1):
            diffs = [by[(arm, s)].heldout[j] - by[("static", s)].heldout[j] for s in seeds
                     if (arm, s) in by and ("static", s) in by]
            lines.append(f"| {arm} | {w} | {statistics.fmean(diffs):+.3f} | {_ci(diffs, None)} |")
    lines += comparisons(runs, shape.endpoint)
    lines += by_difficulty(runs, arms, points)
    lines += ["", "## Training groups with a learning signal (a reward spread)", "",
              "Pooled over seeds; 95% Wilson interval. Selection rollouts: solver attempts spent on reviews and "
              "calibration, per run, on top of the training rollouts.", "",
              "| arm | groups | with signal | share | 95% CI | updates per run | selection rollouts per run | "
              "admitted / retired per run |", "|---|---|---|---|---|---|---|---|"]
    for arm in arms:
        mine = [r for r in runs if r.arm == arm]
        groups = {f"s{r.seed}{g}": v for r in mine for g, v in r.groups.items()}
        frac, (lo, hi), n = pools.signal_fraction(groups)
        lines.append(f"| {arm} | {n} | {round(frac * n)} | {frac:.3f} | [{lo:.3f}, {hi:.3f}] | "
                     f"{statistics.fmean(r.updates for r in mine):.1f} | "
                     f"{statistics.fmean(r.selection_rollouts for r in mine):.0f} | "
                     f"{statistics.fmean(r.admitted for r in mine):.1f} / "
                     f"{statistics.fmean(r.retired for r in mine):.1f} |")
    both = [r for r in runs if r.arm == "both" and r.proposer_reward]
    if both:
        lines += ["", "## Proposer reward r_P over rounds (`both`)", "",
                  "Mean r_P of a round's proposals (1 admitted, partial valid out of band, 0 broken); mean and 95% t "
                  "interval over seeds.", "", "| round | mean r_P | 95% CI |", "|---|---|---|"]
        for j in range(min(len(r.proposer_reward) for r in both)):
            vals = [r.proposer_reward[j] for r in both]
            lines.append(f"| {j + 1} | {statistics.fmean(vals):.3f} | {_ci(vals)} |")
    lines += ["", "## Per run", "", "| arm | seed | held-out reward at each point | updates | signal groups | "
              "mean difficulty trained per wave | broken proposals | empty waves | wall s |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        sig = sum(has_signal(v) for v in r.groups.values())
        lines.append(f"| {r.arm} | {r.seed} | {' -> '.join(f'{v:.3f}' for v in r.heldout)} | {r.updates} | "
                     f"{sig}/{len(r.groups)} | {' '.join(f'{d:.1f}' for d in r.trained_difficulty)} | {r.broken} | "
                     f"{r.empty_waves} | {r.wall_s:.0f} |")
    return "\n".join(lines) + "\n"


def paired(runs: list[Run], arm: str, baseline: str, name: str = "final") -> dict | None:
    """``arm`` minus ``baseline`` on the endpoint ``name``, seed by seed (``aes_ops.power.read_out``);
    None where fewer than 2 seeds ran both."""
    def curves(of: str) -> dict[int, list[float]]:
        return {r.seed: r.heldout for r in runs if r.arm == of}

    got = power.read_out(arm, baseline, curves(arm), curves(baseline), name)
    return got if got["seeds"] > 1 else None


def gate(runs: list[Run], name: str = "final") -> dict | None:
    """The positive control's gate (``readouts.gate``) on the endpoint ``name``."""
    return readouts.gate(paired(runs, *COMPARISONS[0], name))


def comparisons(runs: list[Run], name: str) -> list[str]:
    lines = ["", f"## Read-outs: held-out mean reward {ENDPOINTS[name]}, paired by seed", "",
             "Arm minus baseline, per seed; mean, 95% t interval and sd over seeds (intervals "
             "over runs, not groups); detectable: the smallest difference these seeds detect at that sd with 80% "
             "power. The first row is the gate: the positive control must beat the fixed pool by twice its "
             "detectable difference before any flywheel number is read.", "",
             "| arm | baseline | seeds | mean difference | 95% CI | sd | detectable |", "|---|---|---|---|---|---|---|"]
    for arm, baseline in COMPARISONS:
        if (got := paired(runs, arm, baseline, name)) is not None:
            ci = "n/a" if got["ci95"] is None else f"[{got['ci95'][0]:+.3f}, {got['ci95'][1]:+.3f}]"
            lines.append(f"| {arm} | {baseline} | {got['seeds']} | {got['difference']:+.3f} | {ci} | {got['sd']:.3f} | "
                         f"{got['detectable']:.3f} |")
    if (g := gate(runs, name)) is not None:
        verdict = "**passed**" if g["passed"] else "**not passed**: change the setting, not the analysis"
        lines += ["", f"Gate: oracle - static = {g['difference']:+.3f} against 2 x {g['detectable']:.3f} = "
                      f"{2 * g['detectable']:.3f}: {verdict}."]
    return lines


def by_difficulty(runs: list[Run], arms: list[str], points: list[int]) -> list[str]:
    keys = sorted({k for r in runs for level in r.by_difficulty for k in level},
                  key=lambda k: (k.rsplit("/d", 1)[0], int(k.rsplit("/d", 1)[1])))
    if not keys:
        return []
    several = len({k.rsplit("/d", 1)[0] for k in keys}) > 1  # else the columns name the difficulty alone
    lines = ["", "## Held-out mean reward per difficulty, at the first and last points", "",
             "Mean over seeds. Where the frontier was and where it went.", "",
             "| arm | point | " + " | ".join(k if several else k.rsplit("/", 1)[1] for k in keys) + " |",
             "|---|---|" + "---|" * len(keys)]
    for arm in arms:
        mine = [r for r in runs if r.arm == arm and r.by_difficulty]
        for j in (0, -1):
            vals = [statistics.fmean(r.by_difficulty[j].get(k, 0.0) for r in mine) for k in keys]
            lines.append(f"| {arm} | {points[j]} | " + " | ".join(f"{v:.2f}" for v in vals) + " |")
    return lines


def plot(shape: Shape, runs: list[Run], dest: Path) -> Path:
    """Held-out mean reward over training rollouts per arm (mean over seeds, 95% band)."""
    from aes_ops.figures import png, pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    xs = [w * shape.groups_per_wave * shape.group_size for w in _points(shape)]
    for arm in (a for a in shape.arms if any(r.arm == a for r in runs)):
        mine = [r for r in runs if r.arm == arm]
        mean = [statistics.fmean(r.heldout[j] for r in mine) for j in range(len(xs))]
        ax.plot(xs, mean, marker="o", label=f"{arm} ({len(mine)} seeds)")
        cis = [t_interval([r.heldout[j] for r in mine], bounds=(0.0, 1.0)) for j in range(len(xs))]
        if all(cis):
            ax.fill_between(xs, [c[0] for c in cis], [c[1] for c in cis], alpha=0.15)
    ax.set_xlabel("training rollouts")
    ax.set_ylabel("held-out mean reward")
    ax.set_title(f"{', '.join(shape.families)}: held-out reward per arm")
    ax.legend()
    dest.write_bytes(png(fig))
    return dest


def machine(device: str) -> str:
    import transformers

    gpu = torch.cuda.get_device_name(0) if device == "cuda" else "none (CPU dry run)"
    return (f"{gpu}; {os.cpu_count()} cores ({platform.machine()}); Python {platform.python_version()}, "
            f"torch {torch.__version__}, transformers {transformers.__version__}")


# -- the command --------------------------------------------------------------------------


BASE_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
              "chat_template.jinja", "special_tokens_map.json")
"""What the bootstrap reads of the base model: its architecture and tokenizer, not its weights."""


def bundled_base() -> Path:
    """The bundled SmolLM2 as a transformers folder (needs the project's full install)."""
    from aes_lib.config import Settings
    from aes_lib.learner.base_model import bundled_base_model

    return bundled_base_model(Settings.from_env().home)


def export_base(dest: Path) -> Path:
    """The bundled model's config and tokenizer (3.5 MB, no weights) at ``dest``, to carry."""
    src = bundled_base()
    dest.mkdir(parents=True, exist_ok=True)
    for name in BASE_FILES:
        if (src / name).is_file():
            shutil.copy2(src / name, dest / name)
    return dest


def experiment(shape: Shape, base: Path, device: str, policy_dir: Path, budget_s: float, workers: int,
               after_seed: Callable[[list[Run], Scorer], None]) -> None:
    """Seed after seed, every arm, while the budget allows another seed; ``after_seed`` records
    what has run (a run cut short by its caller's timeout keeps the seeds before)."""
    began = time.monotonic()
    check_scorer(shape)
    say(f"bootstrapping the starting policy ({shape.policy.steps} supervised steps)")
    start_policy(base, shape, policy_dir, device)
    say(f"  done in {time.monotonic() - began:.0f} s")
    scorer = Scorer(workers)
    exp = Experiment(shape, policy_dir, device, scorer)
    runs: list[Run] = []
    runs_began = time.monotonic()
    for n, seed in enumerate(range(shape.first_seed, shape.first_seed + shape.seeds)):
        for arm in shape.arms:
            r = exp.run(arm, seed)
            runs.append(r)
            sig = sum(has_signal(v) for v in r.groups.values())
            say(f"[{arm} s{seed}] held-out {' -> '.join(f'{v:.3f}' for v in r.heldout)}; {r.updates} updates, "
                f"signal groups {sig}/{len(r.groups)}"
                + (f", r_P {' '.join(f'{v:.2f}' for v in r.proposer_reward)}" if r.proposer_reward else "")
                + f" ({r.wall_s:.1f} s)")
        after_seed(runs, scorer)
        per_seed = (time.monotonic() - runs_began) / (n + 1)
        if budget_s and n + 1 < shape.seeds and time.monotonic() - began + per_seed > budget_s:
            say(f"stopping after {n + 1} seed(s): another ({per_seed:.0f} s) would pass the {budget_s:.0f} s budget")
            break


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="default",
                    help="tiny: the CPU dry run (minutes on 2 cores); ladder: issue 48's setting")
    ap.add_argument("--tiny", action="store_true", help="the same as --shape tiny")
    ap.add_argument("--arms", help="override the shape's arms (comma-separated)")
    ap.add_argument("--lr", type=float, help="override the shape's learning rate")
    ap.add_argument("--waves", type=int, help="override the shape's training waves")
    ap.add_argument("--out", type=Path, help="markdown record (default bench/results/pools_experiment_gpu.md; "
                                             "with --tiny, the temp folder)")
    ap.add_argument("--base", type=Path, help="transformers folder with the base model's config and tokenizer "
                                              "(default: the bundled SmolLM2, which needs the full install)")
    ap.add_argument("--export-base", type=Path, metavar="DIR", help="write the bundled model's config and tokenizer "
                                                                    "to DIR (to carry to a lent GPU) and exit")
    ap.add_argument("--seeds", type=int, help="override the shape's seeds")
    ap.add_argument("--batch-groups", type=int, help="override Shape.batch_groups (0: one update per wave)")
    ap.add_argument("--first-seed", type=int, default=0, help="run seeds from this one on (past a pilot's)")
    ap.add_argument("--endpoint", choices=sorted(ENDPOINTS), help="override the shape's endpoint (Shape.endpoint)")
    ap.add_argument("--policy", type=Path, metavar="DIR", help="the starting policy's folder: reused when it holds "
                                                               "this shape's bootstrap, else bootstrapped into "
                                                               "(default: a temp folder)")
    ap.add_argument("--budget-s", type=float, default=420.0, help="start no seed that would end past this (0: none)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="scorer threads")
    args = ap.parse_args(argv)
    if args.export_base:
        say(f"wrote {export_base(args.export_base)}")
        return 0
    name = "tiny" if args.tiny else args.shape
    shape = SHAPES[name]
    if args.seeds:
        shape = dataclasses.replace(shape, seeds=args.seeds)
    shape = dataclasses.replace(shape, first_seed=args.first_seed)
    if args.batch_groups is not None:
        shape = dataclasses.replace(shape, batch_groups=args.batch_groups)
    if args.lr:
        shape = dataclasses.replace(shape, lr=args.lr)
    if args.waves:
        shape = dataclasses.replace(shape, waves=args.waves)
    if args.endpoint:
        shape = dataclasses.replace(shape, endpoint=args.endpoint)
    if args.arms:
        arms = tuple(a.strip() for a in args.arms.split(",") if a.strip())
        if bad := [a for a in arms if a not in ARMS]:
            ap.error(f"--arms: unknown arm(s) {bad}; known: {', '.join(ARMS)}")
        shape = dataclasses.replace(shape, arms=arms)
    base = args.base or bundled_base()
    if not (base / "tokenizer.json").is_file() or not (base / "config.json").is_file():
        ap.error(f"--base {base}: no config.json and tokenizer.json there (make one with --export-base DIR)")
    out = args.out or (Path(tempfile.gettempdir()) / "pools_experiment_gpu_tiny.md" if name == "tiny"
                       else ROOT / "bench/results/pools_experiment_gpu.md")
    began = time.monotonic()
    say(f"device {args.device}; {machine(args.device)}; project modules: {IMPORTS}")

    def record(runs: list[Run], scorer: Scorer) -> None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report(shape, runs, machine(args.device), time.monotonic() - began, scorer, base))
        out.with_suffix(".json").write_text(json.dumps({"shape": dataclasses.asdict(shape),
                                                        "gate": gate(runs, shape.endpoint),
                                                        "read_outs": [c for a, b in COMPARISONS
                                                                      if (c := paired(runs, a, b, shape.endpoint))],
                                                        "runs": [dataclasses.asdict(r) for r in runs]}, indent=1))
        plot(shape, runs, out.with_suffix(".png"))
        say(f"wrote {out} and its .json and .png ({time.monotonic() - began:.0f} s)")

    with tempfile.TemporaryDirectory(prefix="gpu-pools-") as tmp:
        experiment(shape, base, args.device, args.policy or Path(tmp) / "policy", args.budget_s, args.workers, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
