"""A finished pools-experiment run is kept (its result and the setup it ran under) and reused only
under the same setup, so an interrupted experiment goes on where it stopped."""

from __future__ import annotations

from pathlib import Path

import pytest

from aes_lib.flywheel.experiment import ExperimentConfig, ExperimentConfigError
from aes_ops import experiment
from aes_ops.experiment import EvalPoint, RunResult
from aes_ops.experiment_cost import Cost, Spend


def _policy(tmp_path: Path) -> Path:
    folder = tmp_path / "policy"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"weights")
    return folder


def _result() -> RunResult:
    r = RunResult(arm="flywheel", seed=1, updates=7, groups=16, signal_groups=9, proposer_reward=[0.5, 0.25])
    r.points.append(EvalPoint(wave=4, training_rollouts=64, updates=7, policy_version=7, mean_reward=0.53,
                              ci95=[0.4, 0.66], pass_rate=0.28, by_difficulty={"echo-words/d1": 0.9}, failed_tasks=0))
    r.cost = Cost(training=Spend(rollouts=128, container_s=40.5, tokens=2000), selection=Spend(rollouts=40))
    r.phase_s = {"training": 300.0, "evaluation": 60.0}
    return r


def test_a_finished_run_is_reused_under_the_same_setup(tmp_path, monkeypatch):
    monkeypatch.setenv("AES_LEARNER_LR", "2e-4")
    policy, home = _policy(tmp_path), tmp_path / "runs" / "flywheel-s1"
    home.mkdir(parents=True)
    cfg = ExperimentConfig(seeds=3, arms="static,flywheel")
    setup = experiment._setup(cfg, policy)
    experiment._record(home, setup, _result())
    assert experiment._finished(home, setup) == _result()
    # Asking for more seeds or fewer arms is the same setup: the finished runs count.
    assert experiment._finished(home, experiment._setup(ExperimentConfig(seeds=8, arms="flywheel"), policy)) == _result()
    # So is reading them on another endpoint: it changes no run.
    assert experiment._finished(home, experiment._setup(ExperimentConfig(endpoint="curve"), policy)) == _result()


@pytest.mark.parametrize("change", ["lr", "waves", "weights"])
def test_a_run_of_another_setup_is_run_again(tmp_path, monkeypatch, change):
    monkeypatch.setenv("AES_LEARNER_LR", "2e-4")
    policy, home = _policy(tmp_path), tmp_path / "run"
    home.mkdir()
    experiment._record(home, experiment._setup(ExperimentConfig(), policy), _result())
    cfg = ExperimentConfig()
    if change == "lr":
        monkeypatch.setenv("AES_LEARNER_LR", "1e-3")
    elif change == "waves":
        cfg = ExperimentConfig(waves=12)
    else:
        (policy / "model.safetensors").write_bytes(b"other weights")
    assert experiment._finished(home, experiment._setup(cfg, policy)) is None


@pytest.mark.parametrize("eps, reused", [(None, True), ("1e-5", False)])
def test_a_setting_added_since_the_record_counts_at_its_default(tmp_path, monkeypatch, eps, reused):
    """A record written before ``adam_eps`` existed ran at AdamW's default: it is reused while the
    setting is at that default, and run again once the setting moves."""
    policy, home = _policy(tmp_path), tmp_path / "run"
    home.mkdir()
    setup = experiment._setup(ExperimentConfig(), policy)
    old = {**setup, "learner": {k: v for k, v in setup["learner"].items() if k != "adam_eps"}}
    experiment._record(home, old, _result())
    if eps:
        monkeypatch.setenv("AES_LEARNER_ADAM_EPS", eps)
    assert (experiment._finished(home, experiment._setup(ExperimentConfig(), policy)) == _result()) is reused


def test_an_unreadable_or_missing_record_is_no_finished_run(tmp_path):
    policy, home = _policy(tmp_path), tmp_path / "run"
    home.mkdir()
    setup = experiment._setup(ExperimentConfig(), policy)
    assert experiment._finished(home, setup) is None  # a run that crashed before writing it
    experiment._record(home, setup, _result())
    text = (home / experiment.RESULT).read_bytes()
    (home / experiment.RESULT).write_bytes(text[: len(text) // 2])
    assert experiment._finished(home, setup) is None
    (home / experiment.RESULT).write_bytes(text.replace(b'"updates":7', b'"updates":"seven"'))
    assert experiment._finished(home, setup) is None


def test_the_bootstrap_is_made_again_when_its_settings_change(tmp_path, monkeypatch, smollm2_folder):
    """A policy folder under the output is reused only if it was made from the same settings: a
    rerun with another near-miss share (or step count) would otherwise start from the old policy."""
    monkeypatch.setattr("aes_lib.learner.base_model.bundled_base_model", lambda home: smollm2_folder)
    cfg = ExperimentConfig(families="echo-words", bootstrap_width=64, bootstrap_examples=8, bootstrap_steps=2)
    said: list[str] = []
    policy = experiment.prepare_policy(cfg, tmp_path, said.append)
    first = (policy / "model.safetensors").read_bytes()
    assert experiment.prepare_policy(cfg, tmp_path, said.append) == policy and len(said) == 1  # reused
    experiment.prepare_policy(ExperimentConfig(**{**cfg.__dict__, "bootstrap_near_miss": 1.0}), tmp_path, said.append)
    assert len(said) == 2 and (policy / "model.safetensors").read_bytes() != first  # made again


def test_a_near_miss_share_outside_0_1_is_refused():
    with pytest.raises(ExperimentConfigError, match="bootstrap_near_miss must be in"):
        ExperimentConfig(bootstrap_near_miss=1.5)


def test_finished_only_reports_the_finished_runs_and_starts_none(tmp_path):
    """``aes experiment pools --finished-only``: an interrupted bench's report from the runs it
    finished, with the rest named as left out; nothing finished is an error, not an empty report."""
    import asyncio
    import dataclasses

    from aes_ops import experiment_report
    from aes_ops.experiment import ExperimentError

    policy = _policy(tmp_path)
    (policy / "config.json").write_text("{}")
    cfg = ExperimentConfig(policy=str(policy), seeds=2, arms="static,flywheel")
    out = tmp_path / "out"
    with pytest.raises(ExperimentError, match="nothing to report"):
        asyncio.run(experiment.run_experiment(cfg, out, print, finished_only=True))
    setup = experiment._setup(cfg, policy)
    for arm, seed in [("static", 0), ("static", 1), ("flywheel", 0)]:
        home = out / "runs" / f"{arm}-s{seed}"
        home.mkdir(parents=True)
        experiment._record(home, setup, dataclasses.replace(_result(), arm=arm, seed=seed))
    said: list[str] = []
    report = asyncio.run(experiment.run_experiment(cfg, out, said.append, finished_only=True))
    assert [(r["arm"], r["seed"]) for r in report["runs"]] == [("static", 0), ("flywheel", 0), ("static", 1)]
    assert report["left_out"] == ["flywheel s1"] and any("flywheel, seed 1: not finished" in s for s in said)
    assert experiment_report.setup(report)[0].endswith("left out, not finished: flywheel s1")
    assert (out / "pools_experiment.json").is_file()
