"""``aes experiment pools`` end to end on a tiny budget: the arms through the real services
(nats-server, the torch engine, Docker rollouts, the learner, the weight sync; the flywheel's
procedural proposer, validator, calibrator, pool and review, ``blind``'s coin in the planner;
``weighted``'s buffer weights in the wave planner; ``oracle``'s fresh pool per wave; for ``both``
the policy as the parametric proposer and the proposer samples), and the JSON it writes."""

from __future__ import annotations

import json
import math

import pytest

from aes_cli.main import main

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(3600)]


def _tiny_budget(monkeypatch, tmp_path, policy, **more) -> None:
    """One seed, two waves of 2 groups x 2 attempts, one held-out instance per difficulty 1-2 of
    one family; the band widened to [0, 1] to keep the flywheel's pool from being retired empty."""
    for key, value in {
        "AES_HOME": tmp_path / "home", "AES_EXPERIMENT_POLICY": policy, "AES_EXPERIMENT_FAMILIES": "echo-words",
        "AES_EXPERIMENT_MAX_DIFFICULTY": 2, "AES_EXPERIMENT_SEEDS": 1, "AES_EXPERIMENT_WAVES": 2,
        "AES_EXPERIMENT_WAVES_PER_ROUND": 2, "AES_EXPERIMENT_EVAL_EVERY": 2, "AES_EXPERIMENT_HELDOUT_PER_DIFFICULTY": 1,
        "AES_EXPERIMENT_STATIC_POOL_SIZE": 2, "AES_EXPERIMENT_START_PER_FAMILY": 1, "AES_ASSIGNMENTS_PER_ROUND": 1,
        "AES_TRAINING_GROUPS_PER_WAVE": 2, "AES_TRAINING_GROUP_SIZE": 2, "AES_TRAINING_MAX_TURNS": 1,
        "AES_TRAINING_MAX_TOKENS": 32, "AES_LEARNER_GROUPS_PER_BATCH": 1,
        "AES_BAND_LOW": 0.0, "AES_BAND_HIGH": 1.0, "AES_MAX_REVISIONS": 0,
        # the flywheel's own rollouts (calibration, pool review) as short as the training ones
        "AES_SOLVER_MAX_TURNS": 1, "AES_PROPOSALS_PER_ASSIGNMENT": 1, **more,
    }.items():
        monkeypatch.setenv(key, str(value))
    for var in ("AES_MODEL_URL", "AES_NATS_URL", "AES_NATS_USER", "AES_NATS_PASSWORD", "AES_BLOB_URL",
                "AES_PROPOSER_MODEL_URL", "AES_PROPOSER_MODEL"):
        monkeypatch.delenv(var, raising=False)


ARMS = ("static", "weighted", "oracle", "flywheel", "blind")


def test_tiny_experiment_writes_every_arm_and_its_read_outs(tiny_model, tmp_path, monkeypatch, capsys):
    """Static, weighted, oracle, flywheel and blind. The starting policy is the random tiny model
    (no training to wait for): it scores 0, hence the wide band, and the oracle's frontier is the
    easiest difficulty."""
    _tiny_budget(monkeypatch, tmp_path, tiny_model, AES_EXPERIMENT_ARMS=",".join(ARMS))
    out = tmp_path / "out"
    assert main(["experiment", "pools", "--out", str(out), "--progress", "plain"]) == 0
    printed = capsys.readouterr().out
    assert "groups with a learning signal" in printed
    assert "Gate (oracle minus static at the last point): not read, fewer than 2 seeds." in printed

    report = json.loads((out / "pools_experiment.json").read_text())
    assert (out / "pools_experiment.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "data:image/png;base64," in (page := (out / "pools_experiment.html").read_text())
    assert all(f"<td>{arm}</td>" in page for arm in ARMS)
    assert report["rollout_budget"] == 2 * 2 * 2
    assert report["heldout"] == ["echo-words-d1-s1099511627776", "echo-words-d2-s1099511627776"]
    assert list(report["arms"]) == list(ARMS)
    # the plan's read-outs among these arms, the gate first; one seed: no interval, no gate
    assert [(o["arm"], o["baseline"]) for o in report["read_outs"]] == [
        ("oracle", "static"), ("weighted", "static"), ("flywheel", "static"), ("flywheel", "weighted"),
        ("flywheel", "blind")]
    assert all([q["wave"] for q in o["points"]] == [0, 2] and o["points"][0]["difference"] == pytest.approx(0.0)
               for o in report["read_outs"])  # the same start, scored with the same draws
    assert report["gate"] is None
    runs = {r["arm"]: r for r in report["runs"]}
    for arm, data in report["arms"].items():
        run = runs[arm]
        # an evaluation before training and one after the second wave, on the same budget
        assert [p["wave"] for p in data["points"]] == [0, 2]
        assert [p["training_rollouts"] for p in data["points"]] == [0, 8]
        assert run["training_rollouts"] == 8 and run["groups"] == 4  # every training group reached the learner
        for p in run["points"]:
            assert p["failed_tasks"] == 0 and 0.0 <= p["mean_reward"] <= 1.0
            lo, hi = p["ci95"]  # 2 held-out tasks: an interval over tasks
            assert 0.0 <= lo <= p["mean_reward"] <= hi <= 1.0
            assert set(p["by_difficulty"]) == {"echo-words/d1", "echo-words/d2"}
        assert data["points"][1]["updates"] == run["updates"] == run["signal_groups"]  # one group a batch
        lo, hi = data["signal_ci95"]
        assert 0.0 <= lo <= data["signal_fraction"] <= hi <= 1.0
        assert data["signal_fraction"] == pytest.approx(run["signal_groups"] / run["groups"])
        assert all(math.isfinite(d) and d >= 1 for d in run["trained_difficulty"])
        assert data["points"][0]["ci95"] is None  # one seed: no interval over seeds
        # no model proposes in either arm: no proposer reward, samples or updates
        assert run["proposer_reward"] == [] and run["proposer_samples"] == run["proposer_updates"] == 0
    # only the flywheels chose environments: they validated and calibrated the proposer's instances
    # and reviewed their pools; the fixed pools spent nothing on choosing, nor did the oracle, whose
    # one reading of the frontier (before wave 1) was the evaluation every arm makes
    for arm in ("static", "weighted", "oracle"):
        assert runs[arm]["selection_rollouts"] == {} and runs[arm]["validations"] == 0, arm
    for arm in ("flywheel", "blind"):
        assert runs[arm]["validations"] >= 1
        assert runs[arm]["selection_rollouts"].get("pool_review", 0) >= 4  # the start pool rerun
    # the oracle trained at its frontier, the easiest difficulty, on fresh instances each wave
    assert runs["oracle"]["trained_difficulty"] == [1.0, 1.0] and runs["oracle"]["admitted"] == 0
    fresh = [sorted(d.name for d in (out / "runs" / "oracle-s0" / "oracle" / f"w{w}").iterdir()) for w in (0, 1)]
    assert all(len(names) == 2 for names in fresh) and not set(fresh[0]) & set(fresh[1])
    # what each arm spent, from the summaries and results the services published
    for arm, run in runs.items():
        spent = run["cost"]
        assert spent["training"]["rollouts"] == 8 and spent["training"]["container_s"] > 0
        assert spent["training"]["tokens"] > 0  # the policy sampled every attempt's reply
        assert spent["selection"]["rollouts"] == sum(run["selection_rollouts"].values())
        per_group = report["arms"][arm]["cost"]["per_signal_group"]
        if run["signal_groups"]:
            total = spent["training"]["rollouts"] + spent["selection"]["rollouts"]
            assert per_group["rollouts"] == pytest.approx(total / run["signal_groups"])
    assert runs["flywheel"]["cost"]["selection"]["container_s"] > 0  # validations and calibration
    assert runs["blind"]["cost"]["selection"]["container_s"] > 0


def test_tiny_experiment_both_roles_trains_the_policy_as_proposer(experiment_policy, tmp_path, monkeypatch, capsys):
    """The ``both`` arm from the experiment's own bootstrap policy (it answers the proposer's
    prompt): two rounds, a wave after each, of 2 assignments x 3 proposals, sampled at
    temperature 1 (about half the answers parse, so groups have a spread of r_P: 1 admitted in
    the wide band, 0 no answer). The proposals reach the learner as proposer samples and train
    it; r_P per round is in the JSON, the markdown and the printed summary."""
    _tiny_budget(monkeypatch, tmp_path, experiment_policy, AES_EXPERIMENT_ARMS="both",
                 AES_EXPERIMENT_WAVES_PER_ROUND=1, AES_ASSIGNMENTS_PER_ROUND=2, AES_PROPOSALS_PER_ASSIGNMENT=3,
                 AES_PROPOSER_TEMPERATURE=1.0)
    out, md = tmp_path / "out", tmp_path / "pools.md"
    assert main(["experiment", "pools", "--out", str(out), "--progress", "plain", "--markdown", str(md)]) == 0
    printed = capsys.readouterr().out

    report = json.loads((out / "pools_experiment.json").read_text())
    [run] = report["runs"]
    assert run["arm"] == "both" and run["training_rollouts"] == 8 and run["groups"] == 4
    assert run["validations"] >= 1  # some answers parsed and were validated as instances
    # every proposal of the two rounds became a proposer sample; some group had a spread and trained
    assert run["proposer_samples"] == 2 * 2 * 3
    assert len(run["proposer_reward"]) == 2 and all(0.0 <= r <= 1.0 for r in run["proposer_reward"])
    assert run["proposer_updates"] >= 1
    data = report["arms"]["both"]
    assert data["proposer_reward"] == run["proposer_reward"] and data["proposer_updates"] == run["proposer_updates"]
    rounds = " -> ".join(f"{r:.3f}" for r in run["proposer_reward"])
    assert f"both: proposer reward per round {rounds}" in printed
    assert f"| both | 0 | {rounds} | 12 | {run['proposer_updates']} |" in md.read_text()
    assert "Proposer reward per round" in (out / "pools_experiment.html").read_text()


def test_a_flywheel_whose_pool_empties_keeps_its_waves_and_final_point(tiny_model, tmp_path, monkeypatch):
    """The random tiny model scores 0, so with the band at [0.5, 1] the first round's review
    retires the start pool and admits nothing; the second round finds the pool empty and plans
    nothing. Both waves are recorded as empty, and the held-out point after wave 2 is still
    taken: the run ends with the same points as the others instead of stopping at wave 0."""
    _tiny_budget(monkeypatch, tmp_path, tiny_model, AES_EXPERIMENT_ARMS="flywheel",
                 AES_EXPERIMENT_WAVES_PER_ROUND=1, AES_BAND_LOW=0.5)
    out = tmp_path / "out"
    assert main(["experiment", "pools", "--out", str(out), "--progress", "plain"]) == 0

    report = json.loads((out / "pools_experiment.json").read_text())
    [run] = report["runs"]
    assert run["admitted"] == 0 and run["retired"] >= 1
    assert run["empty_waves"] == 2 and run["training_rollouts"] == 0 and run["updates"] == 0
    assert [p["wave"] for p in run["points"]] == [0, 2]
    assert [p["wave"] for p in report["arms"]["flywheel"]["points"]] == [0, 2]
