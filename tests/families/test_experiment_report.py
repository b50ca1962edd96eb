"""The pools experiment's summary over seeds and what it shows of it: the plot, the HTML page and
the markdown summary, on runs made up here (the end-to-end run is tests/training)."""

from __future__ import annotations

import base64
import dataclasses
import re
from pathlib import Path

import pytest

from aes_lib.flywheel.experiment import ExperimentConfig, ExperimentConfigError
from aes_lib.flywheel.readouts import COMPARISONS
from aes_ops.experiment import EvalPoint, RunResult, gate, read_outs, summarize
from aes_ops.experiment_cost import Cost, Spend
from aes_ops.experiment_report import markdown, write


def _run(arm: str, seed: int, rewards: list[float], signal: int, admitted: int = 0) -> RunResult:
    points = [EvalPoint(wave=2 * i, training_rollouts=16 * i, updates=i, policy_version=i, mean_reward=r,
                        ci95=[max(0.0, r - 0.1), min(1.0, r + 0.1)], pass_rate=r / 2,
                        by_difficulty={"echo-words/d1": r, "echo-words/d2": r / 2, "pick-first/d1": 0.5},
                        failed_tasks=0) for i, r in enumerate(rewards)]
    return RunResult(arm=arm, seed=seed, points=points, training_rollouts=32, groups=8, signal_groups=signal,
                     updates=signal, trained_difficulty=[1.0, 2.0], wall_s=100.0 + seed, admitted=admitted,
                     phase_s={"stack": 10.0, "evaluation": 30.0, "training": 50.0, "choosing": 10.0 + seed},
                     cost=Cost(training=Spend(32, 64.0, 320), selection=Spend(8 * admitted, 20.0 * admitted, 80 * admitted)))


def _report_runs() -> list[RunResult]:
    return [_run("static", 0, [0.1, 0.2], 2), _run("flywheel", 0, [0.1, 0.4], 5, admitted=2),
            _run("static", 1, [0.3, 0.2], 3), _run("flywheel", 1, [0.3, 0.6], 6, admitted=3)]


def _report(extra: list[RunResult] = ()) -> dict:
    runs = _report_runs() + list(extra)
    cfg = {"seeds": 2, "arms": "static,flywheel", "waves": 2, "families": "echo-words", "max_difficulty": 4,
           "heldout_per_difficulty": 1, "eval_k": 2, "eval_every": 1, "static_pool_size": 6, "start_per_family": 2,
           "waves_per_round": 2, "policy": "bootstrap", "buffer_weight": 0.1, "frontier_every": 2}
    return {"config": cfg, "training": {"groups_per_wave": 4, "group_size": 4, "max_turns": 1, "max_tokens": 32,
                                        "temperature": 1.0},
            "learner": {"lr": 5e-4, "groups_per_batch": 1}, "rollout_budget": 32, "heldout": ["a", "b"],
            "runs": [dataclasses.asdict(r) for r in runs],
            "arms": summarize(runs), "read_outs": (outs := read_outs(runs)), "gate": gate(outs), "wall_s": 404.0}


def test_summary_is_over_seeds_with_intervals_and_pooled_signal():
    arms = _report()["arms"]
    fly = arms["flywheel"]
    assert [p["mean_reward"] for p in fly["points"]] == pytest.approx([0.2, 0.5])
    assert fly["points"][1]["ci95"][0] < 0.5 < fly["points"][1]["ci95"][1]  # two seeds: an interval
    assert fly["signal_fraction"] == pytest.approx(11 / 16) and arms["static"]["signal_fraction"] == pytest.approx(5 / 16)
    assert fly["groups"] == 16


def test_arms_are_compared_seed_by_seed():
    """Seed 0: 0.4 - 0.2, seed 1: 0.6 - 0.2 at the last point; the same start at the first."""
    [flywheel] = _report()["read_outs"]
    assert (flywheel["arm"], flywheel["baseline"]) == ("flywheel", "static")
    first, last = flywheel["points"]
    assert first["difference"] == pytest.approx(0.0) and first["sd"] == pytest.approx(0.0)
    assert last["difference"] == pytest.approx(0.3) and last["sd"] == pytest.approx(0.1 * 2 ** 0.5)
    lo, hi = last["ci95"]  # two seeds: t(1) = 12.7, half-width 12.7 * 0.1414 / sqrt(2)
    assert lo == pytest.approx(0.3 - 1.2706, abs=1e-3) and hi == 1.0  # clipped to the range of a difference
    assert last["detectable"] > 1.0  # two seeds cannot resolve a difference of 0.1


def test_the_read_outs_follow_the_plan_with_the_positive_control_first():
    """Every arm of issue 48 paired against its baselines in the pre-registered order; the gate is
    oracle minus static at the last point against twice its detectable difference."""
    extra = [_run(arm, seed, rewards, 4) for arm, by_seed in {
        "oracle": ([0.1, 0.9], [0.3, 0.92]), "weighted": ([0.1, 0.3], [0.3, 0.3]), "blind": ([0.1, 0.3], [0.3, 0.4]),
        "both": ([0.1, 0.5], [0.3, 0.5])}.items() for seed, rewards in enumerate(by_seed)]
    report = _report(extra)
    assert [(o["arm"], o["baseline"]) for o in report["read_outs"]] == list(COMPARISONS) == [
        ("oracle", "static"), ("weighted", "static"), ("flywheel", "static"), ("flywheel", "weighted"),
        ("flywheel", "blind"), ("both", "flywheel")]
    blind = next(o for o in report["read_outs"] if o["baseline"] == "blind")["points"][-1]
    assert blind["difference"] == pytest.approx(0.15)  # 0.4 - 0.3 and 0.6 - 0.4
    g = report["gate"]  # 0.9 - 0.2 and 0.92 - 0.2: sd 0.014, detectable 0.141
    assert (g["difference"], g["detectable"], g["passed"]) == (pytest.approx(0.71), pytest.approx(0.1408, abs=1e-4), True)
    text = markdown(report, "2 cores", "2026-12-01", "aes experiment pools")
    assert "| oracle | static | 2 | 2 | +0.710 |" in text and "| flywheel | blind | 2 | 2 | +0.150 |" in text
    assert "Gate: oracle minus static at the last point +0.710 against twice its detectable difference 0.282: passed." \
        in text
    # 0.1 and 0.3 better: sd 0.14, detectable 1.41, so +0.2 does not pass; one seed reads no gate
    noisy = [_run("oracle", 0, [0.1, 0.3], 4), _run("oracle", 1, [0.3, 0.5], 4)]
    assert gate(read_outs(_report_runs() + noisy))["passed"] is False
    assert gate(read_outs([_run("oracle", 0, [0.1, 0.9], 4), _run("static", 0, [0.1, 0.2], 2)])) is None
    assert _report()["gate"] is None and "Gate" not in markdown(_report(), "2 cores", "2026-12-01", "aes")


def test_the_read_outs_and_the_gate_can_be_read_on_the_learning_curve():
    """AES_EXPERIMENT_ENDPOINT=curve: the mean over the points after the start, as the harness's
    ``--endpoint curve``; both arms end at 0.9, the oracle got there a point sooner."""
    runs = [_run(arm, seed, rewards, 4) for arm, by_seed in {
        "oracle": ([0.1, 0.9, 0.9], [0.3, 0.88, 0.9]), "static": ([0.1, 0.3, 0.9], [0.3, 0.32, 0.9])}.items()
        for seed, rewards in enumerate(by_seed)]
    final, curve = read_outs(runs)[0], read_outs(runs, "curve")[0]
    assert (final["endpoint"], final["difference"]) == ("final", pytest.approx(0.0))
    assert (curve["endpoint"], curve["difference"]) == ("curve", pytest.approx(0.29))
    assert [q["difference"] for q in curve["points"]] == pytest.approx([0.0, 0.58, 0.0])  # the same rows per point
    assert gate(read_outs(runs, "curve"))["endpoint"] == "curve"
    report = {**_report(runs), "read_outs": (outs := read_outs(_report_runs() + runs, "curve")), "gate": gate(outs)}
    assert "Gate: oracle minus static averaged over the points after the start +0.290" in \
        markdown(report, "2 cores", "2026-12-01", "aes")
    with pytest.raises(ExperimentConfigError, match="AES_EXPERIMENT_ENDPOINT"):
        ExperimentConfig(endpoint="best")


def test_learning_within_an_arm_is_seed_by_seed_overall_and_per_family():
    """Flywheel: 0.1 -> 0.4 and 0.3 -> 0.6; its echo-words half of that (d2 is half of d1), pick-first
    flat. Static: +0.1 and -0.1."""
    arms = _report()["arms"]
    overall, echo, pick = arms["flywheel"]["gain"]
    assert (overall["family"], overall["seeds"], overall["gain"]) == ("all", 2, pytest.approx(0.3))
    assert overall["ci95"] == pytest.approx([0.3, 0.3])  # the same gain on both seeds
    assert (echo["family"], echo["gain"]) == ("echo-words", pytest.approx(0.225))
    assert (pick["family"], pick["gain"]) == ("pick-first", pytest.approx(0.0))
    static = arms["static"]["gain"][0]
    assert static["gain"] == pytest.approx(0.0) and static["ci95"][0] < -0.5 and static["ci95"][1] > 0.5
    text = markdown(_report(), "2 cores", "2026-12-01", "aes experiment pools")
    assert "| flywheel | echo-words (curriculum) | 2 | +0.225 |" in text
    assert "| flywheel | pick-first (control) | 2 | +0.000 |" in text and "| static | all | 2 | +0.000 |" in text


def test_cost_is_per_admitted_task_and_per_signal_group():
    """Selection spending over admissions; all spending over the groups with a reward spread."""
    arms = _report()["arms"]
    fly, static = arms["flywheel"]["cost"], arms["static"]["cost"]
    assert fly["per_admitted_task"] == {"rollouts": 8.0, "container_s": 20.0, "tokens": 80.0}
    assert fly["per_signal_group"] == {"rollouts": pytest.approx((64 + 40) / 11),
                                       "container_s": pytest.approx((128 + 100) / 11),
                                       "tokens": pytest.approx((640 + 400) / 11)}
    assert static["per_admitted_task"] == {"rollouts": None, "container_s": None, "tokens": None}
    assert static["per_signal_group"]["rollouts"] == pytest.approx(64 / 5)


def test_page_carries_the_plot_and_every_table(tmp_path: Path):
    report = _report()
    png, page = write(report, tmp_path)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = page.read_text()
    [embedded] = re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    assert base64.b64decode(embedded) == png.read_bytes()
    assert html.count("<table>") == 7
    assert "<td>flywheel</td><td>2</td><td>16</td><td>1.0</td><td>0.500</td>" in html  # the last evaluation point
    assert "<td>flywheel</td><td>16</td><td>11</td><td>0.688</td>" in html  # signal groups pooled over seeds


def test_markdown_renders_the_same_sections():
    text = markdown(_report(), "2 cores", "2026-12-01", "aes experiment pools")
    assert text.count("\n## ") == 7 and "- total wall time: 404 s" in text
    assert "| flywheel | static | 2 | 2 | +0.300 |" in text
    assert "| flywheel | per admitted task | 8.0 | 20.000 | 80.000 |" in text
    assert "| static | 10 | 30 | 50 | 10 | 100 |" in text  # seconds per run, seeds 0 and 1 averaged
    assert "| flywheel | 2 | 16 | 1.0 | 0.500 |" in text
    assert "| static | 1 | 0.300 -> 0.200 | 3 | 3/8 | 1.0 2.0 | 0 / 0 | 0 | 101 |" in text


def test_the_proposer_reward_is_summarized_and_shown_only_where_the_policy_proposes(tmp_path: Path):
    report = _report()
    both = [dataclasses.replace(_run("both", 0, [0.1, 0.5], 6), proposer_reward=[0.5, 0.75], proposer_samples=12,
                                proposer_updates=3),
            dataclasses.replace(_run("both", 1, [0.2, 0.4], 4), proposer_reward=[0.25], proposer_samples=6,
                                proposer_updates=1)]
    arms = summarize(both)["both"]
    # r_P per round over the seeds that reached the round; samples and updates per run
    assert arms["proposer_reward"] == pytest.approx([0.375, 0.75])
    assert (arms["proposer_samples"], arms["proposer_updates"]) == (9.0, 2.0)
    assert report["arms"]["static"]["proposer_reward"] == [] and report["arms"]["flywheel"]["proposer_updates"] == 0
    report["runs"] += [dataclasses.asdict(r) for r in both]
    report["arms"] |= summarize(both)
    plain = markdown(_report(), "2 cores", "2026-12-01", "aes experiment pools")
    text = markdown(report, "2 cores", "2026-12-01", "aes experiment pools")
    assert text.count("\n## ") == plain.count("\n## ") + 1  # one section more, the proposer's
    assert "## Proposer reward per round, where the policy also proposes" in text
    assert "Proposer reward" not in plain
    assert "| both | 0 | 0.500 -> 0.750 | 12 | 3 |" in text and "| both | 1 | 0.250 | 6 | 1 |" in text
    assert "| static | 0 | -" not in text  # the arms where no model proposes have no row
    _, page = write(report, tmp_path)
    assert page.read_text().count("<table>") == text.count("\n## ")
