"""bench/gpu_pools_experiment.py, the pools experiment's one-shot script for a lent GPU: its
in-process scorer against the families' reference solutions, and its CPU dry run on what the
lent machine has (msgspec, nats, docker, tomli_w and httpx made unimportable)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
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
    for arm in ("static", "flywheel", "both"):
        assert f"| {arm} | 0 | 0 | 0.0 |" in text and f"| {arm} | 2 | 16 |" in text  # before and after 2 waves
    assert "| flywheel | 2 |" in text.split("Gain over the static pool")[1]
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
