"""bench/gpu_pools_experiment.py, the pools experiment's one-shot script for a lent GPU: its
in-process scorer against the families' reference solutions, and its CPU dry run on what the
lent machine has (msgspec, nats, docker, tomli_w and httpx made unimportable)."""

from __future__ import annotations

import importlib.util
import json
import random
import subprocess
import sys
import types
from pathlib import Path

import pytest

from aes_lib.families import Instance, Params

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "gpu_pools_experiment.py"


def _load():
    spec = importlib.util.spec_from_file_location("gpu_pools_experiment", SCRIPT)
    module = sys.modules["gpu_pools_experiment"] = importlib.util.module_from_spec(spec)  # dataclasses look it up
    spec.loader.exec_module(module)
    return module


bench = _load()


@pytest.mark.parametrize("family", ["echo-words", "reverse-text", "make-files"])
def test_the_scorer_gives_the_reference_full_credit_and_nothing_none(family):
    task = bench.spec(Instance(family, Params(3, 7)))
    reference = " && ".join(task.solution.splitlines())  # /app in it is rewritten to the attempt's folder
    assert bench.score_command(task.tests, reference) == 1.0
    assert bench.score_command(task.tests, "true") == 0.0


def test_the_scorer_gives_partial_credit_per_unit():
    task = bench.spec(Instance("echo-words", Params(2, 7)))
    words = task.solution.split("' ")[1].split(" >")[0].split()
    # the first word right, the second wrong: 1 of 2 words, and the line count (3 units) -> 2/3
    got = bench.score_command(task.tests, f"printf '%s\\n' {words[0]} nope > /app/answer.txt")
    assert got == pytest.approx(2 / 3)


def test_scoring_runs_each_command_once_per_instance():
    scorer = bench.Scorer(workers=2)
    inst = Instance("echo-words", Params(1, 7))
    word = bench.spec(inst).solution.split("' ")[1].split(" >")[0]
    reply = f"```bash\nprintf '%s\\n' {word} > /app/answer.txt\n```"
    assert scorer.rewards([inst, inst, inst], [reply, reply, "no command"]) == [1.0, 1.0, 0.0]
    assert scorer.runs == 1


BLOCKED = ("msgspec", "nats", "docker", "tomli_w", "httpx")
DRY_RUN = (f"import runpy, sys; sys.modules.update(dict.fromkeys({BLOCKED!r})); "
           f"sys.argv = [{str(SCRIPT)!r}] + sys.argv[1:]; runpy.run_path({str(SCRIPT)!r}, run_name='__main__')")


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_dry_run_without_the_bus_packages_writes_every_arm(smollm2_folder, tmp_path):
    """The lent GPU's python has no msgspec: the script must load the project's pieces without
    it, bootstrap the policy, run the three arms and write the record."""
    out = tmp_path / "gpu.md"
    done = subprocess.run([sys.executable, "-c", DRY_RUN, "--device", "cpu", "--tiny", "--base", str(smollm2_folder),
                           "--out", str(out), "--workers", "2"], capture_output=True, text=True, timeout=1700)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "project modules: the bus layer stood in for (msgspec is missing)" in done.stdout
    text = out.read_text()
    assert "in-process scorer, not the project's Docker verifier" in text
    assert "seeds run: 2 of 2" in text
    for arm in bench.ARMS:
        assert f"| {arm} | 0 | 0 | 0.0 |" in text and f"| {arm} | 2 | 16 |" in text  # before and after 2 waves
    assert "| flywheel | 2 |" in text.split("Gain over the static pool")[1]
    read_outs = text.split("## Read-outs: held-out mean reward at the last point")[1]
    for arm, baseline in bench.COMPARISONS:
        assert f"| {arm} | {baseline} | 2 |" in read_outs
    assert "Gate: oracle - static = " in read_outs
    assert out.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
    assert {r["arm"] for r in json.loads(out.with_suffix(".json").read_text())["runs"]} == set(bench.ARMS)
    assert "## Proposer reward r_P over rounds (`both`)" in text and "| 1 |" in text.split("r_P over rounds")[1]
    commands = int(text.split("distinct commands run")[0].rsplit("; ", 1)[1])
    assert commands > 0  # the bootstrapped policy answered with fenced commands that ran


def test_the_device_wrapper_parses():
    done = subprocess.run(["bash", "-n", str(ROOT / "bench/gpu_pools_experiment.sh")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_scorer_that_cannot_run_commands_stops_the_run(monkeypatch):
    """Every reward 0 because bash never ran must not pass for a policy that learned nothing."""
    bench.check_scorer(bench.TINY)  # this machine's scorer works
    monkeypatch.setattr(bench, "_run_command", lambda command, workdir: None)
    with pytest.raises(RuntimeError, match="reference solution 0.0"):
        bench.check_scorer(bench.TINY)


def _experiment(**shape) -> "bench.Experiment":
    """An Experiment whose policy is never loaded: the arms' choices alone are tested."""
    return bench.Experiment(bench.Shape(**shape), Path("/nonexistent"), "cpu", bench.Scorer(workers=1))


def test_weighted_sampling_draws_instances_without_a_spread_less():
    exp = _experiment(groups_per_wave=1)
    solved, open_ = Instance("ladder", Params(1, 1)), Instance("ladder", Params(3, 2))
    seen = {solved: [1.0] * 4, open_: [0.0, 1.0, 0.0, 1.0]}
    rng = random.Random(0)
    picks = [exp.weighted_pick([solved, open_], seen, rng)[0] for _ in range(2000)]
    share = picks.count(open_) / len(picks)
    assert share == pytest.approx(1 / 1.1, abs=0.03)  # weights 1 and buffer_weight 0.1
    uniform = [exp.uniform_pick([solved, open_], rng)[0] for _ in range(2000)]
    assert uniform.count(open_) / len(uniform) == pytest.approx(0.5, abs=0.05)


@pytest.mark.parametrize(("rates", "frontier"), [
    ({1: 1.0, 2: 0.95, 3: 0.6, 4: 0.4, 5: 0.1}, 3),
    ({1: 1.0, 2: 1.0, 3: 0.0, 4: 0.0, 5: 0.0}, 3),  # the lowest unmastered, even where nothing passes yet
    ({1: 1.0, 2: 1.0, 3: 0.95, 4: 0.9, 5: 0.92}, 5),  # all mastered: the top
])
def test_the_oracle_trains_at_the_lowest_difficulty_not_yet_mastered(monkeypatch, rates, frontier):
    exp = _experiment(families=("ladder",), max_difficulty=0, groups_per_wave=4)
    by_level = {f"ladder/d{d}": r for d, r in rates.items()}
    monkeypatch.setattr(exp, "heldout_rates", lambda policy, seed: ([0.0] * len(exp.held), by_level))
    run = bench.Run("oracle", 0)
    assert exp.frontier(None, run, 1) == {"ladder": frontier}
    assert run.frontier == [frontier] and run.selection_rollouts == len(exp.held) * exp.shape.eval_k
    picked = exp.at_frontier({"ladder": 3}, random.Random(1))
    assert len(picked) == 4 and {i.params.difficulty for i in picked} == {3}
    assert len({i.params.seed for i in picked}) == 4 and not set(picked) & set(exp.held)  # fresh, never held out


def test_the_oracle_reads_its_frontier_from_an_evaluation_of_the_same_weights(monkeypatch):
    """Where the last evaluation saw the weights the oracle is about to train, its frontier is
    that evaluation's (no rollouts of its own); after an update it reads the held-out set again."""
    exp = _experiment(families=("ladder",), max_difficulty=0)
    own = {f"ladder/d{d}": 0.0 for d in range(1, 11)}
    monkeypatch.setattr(exp, "heldout_rates", lambda policy, seed: ([0.0] * len(exp.held), own))
    run = bench.Run("oracle", 0, by_difficulty=[{"ladder/d1": 1.0, "ladder/d2": 0.5}], updates_at=[3])
    assert exp.frontier(types.SimpleNamespace(updates=3), run, 5) == {"ladder": 2}
    assert run.selection_rollouts == 0
    assert exp.frontier(types.SimpleNamespace(updates=4), run, 7) == {"ladder": 1}
    assert run.selection_rollouts == len(exp.held) * exp.shape.eval_k


def test_the_blind_flywheel_moves_by_a_coin_whatever_the_pass_rate():
    exp = _experiment(families=("ladder",))
    parents = [Instance("ladder", Params(5, s)) for s in range(60)]
    solved = {p: [1.0, 1.0, 0.0, 1.0] for p in parents}  # the planner would make every child harder
    informed = exp.moved(parents, solved, random.Random(2))
    blind = exp.moved(parents, solved, random.Random(2), blind=True)
    assert {c.params.difficulty for c in informed} == {6}
    moves = [c.params.difficulty for c in blind]
    assert set(moves) == {4, 6} and 15 < moves.count(4) < 45
    # With no spread both take the longer step; only the direction differs.
    mastered = {p: [1.0] * 4 for p in parents}
    assert {c.params.difficulty for c in exp.moved(parents, mastered, random.Random(2))} == {7}
    assert {c.params.difficulty for c in exp.moved(parents, mastered, random.Random(2), blind=True)} == {3, 7}


def _runs(arm: str, finals: list[float]) -> list:
    return [bench.Run(arm, seed, heldout=[0.2, v]) for seed, v in enumerate(finals)]


def test_the_gate_passes_only_at_twice_the_detectable_difference():
    static = _runs("static", [0.30, 0.32, 0.31, 0.29, 0.30, 0.31])
    clear = bench.gate(static + _runs("oracle", [0.50, 0.53, 0.52, 0.49, 0.51, 0.50]))
    assert clear["passed"] and clear["difference"] == pytest.approx(0.2, abs=0.01)
    noisy = bench.gate(static + _runs("oracle", [0.50, 0.20, 0.45, 0.25, 0.60, 0.30]))
    assert not noisy["passed"] and noisy["difference"] > 0 and noisy["difference"] < 2 * noisy["detectable"]
    assert bench.gate(static) is None  # no oracle run: no gate to read


def test_the_harness_optimizer_is_the_learners():
    from aes_lib.learner.config import LearnerConfig

    config = LearnerConfig()
    assert bench.ADAMW == {"weight_decay": config.weight_decay, "eps": config.adam_eps}


def test_the_curve_endpoint_tells_a_faster_climb_from_a_slower_one_to_the_same_end():
    """Both arms end at 0.9; the one that got there sooner wins on the curve, ties on the final."""
    fast = [bench.Run("oracle", s, heldout=[0.3, 0.7 + d, 0.9, 0.9]) for s, d in enumerate([0.0, 0.02, -0.01])]
    slow = [bench.Run("static", s, heldout=[0.3, 0.4 + d, 0.6, 0.9]) for s, d in enumerate([0.01, 0.0, 0.02])]
    assert bench.paired(fast + slow, "oracle", "static", "final")["difference"] == pytest.approx(0.0)
    curve = bench.paired(fast + slow, "oracle", "static", "curve")
    assert curve["endpoint"] == "curve" and curve["difference"] == pytest.approx((0.3 + 0.3 + 0.0) / 3, abs=0.01)


def test_a_powered_run_starts_past_its_pilots_seeds(monkeypatch, tmp_path):
    ran = []
    monkeypatch.setattr(bench, "check_scorer", lambda shape: None)
    monkeypatch.setattr(bench, "start_policy", lambda *a: None)
    monkeypatch.setattr(bench.Experiment, "__init__", lambda self, *a: None)
    monkeypatch.setattr(bench.Experiment, "run", lambda self, arm, seed: ran.append(seed) or bench.Run(arm, seed))
    shape = bench.dataclasses.replace(bench.TINY, arms=("static",), seeds=3, first_seed=10)
    bench.experiment(shape, tmp_path, "cpu", tmp_path / "policy", 0, 1, lambda runs, scorer: None)
    assert ran == [10, 11, 12]


@pytest.mark.parametrize(("batch_groups", "updates"), [(0, [3, 1]), (2, [2, 2]), (4, [4])])
def test_updates_follow_the_groups_with_a_spread_under_the_learners_rule(monkeypatch, batch_groups, updates):
    """Two waves with 3 and then 1 groups with a spread (of 4): one update a wave, or one per
    ``batch_groups`` such groups with the remainder carried, each with its sampling-time mu."""
    exp = _experiment(groups_per_wave=4, group_size=2, batch_groups=batch_groups)
    exp.pending = []
    spreads = iter([[0.0, 1.0] * 3 + [1.0, 1.0], [0.0, 1.0] + [0.0, 0.0] * 3])
    sample = bench.Sample([1], [2, 3], "x")
    monkeypatch.setattr(exp, "attempts", lambda policy, flat, seed: ([sample] * len(flat), next(spreads)))
    monkeypatch.setattr(bench, "sampling_logprobs", lambda policy, batch: [bench.torch.zeros(2)] * len(batch))
    made = []
    monkeypatch.setattr(bench, "dppo_step", lambda policy, samples, adv, opt=None, mu=None:
                        made.append((len(samples) // 2, mu is None or mu.numel() == 2 * len(samples))))
    run, picked = bench.Run("static", 0), [Instance("ladder", Params(3, s)) for s in range(4)]
    for wave in (1, 2):
        exp.wave(object(), run, picked, {}, wave)
    assert [groups for groups, _ in made] == updates and all(aligned for _, aligned in made)
