"""The calibration rule: rollout budget, band, spread, revisions, proposer reward."""

import pytest

from aes_lib.flywheel.calibration import CalibrationRule, CalibrationRuleError

RULE = CalibrationRule()


def test_four_rollouts_first():
    assert RULE.rollouts_needed([]) == 4
    assert RULE.rollouts_needed([1.0, 0.0]) == 4


@pytest.mark.parametrize(
    "rewards, needed",
    [
        ([0.0, 0.0, 0.0, 0.0], 4),  # mean 0: far below the band (0.25 away)
        ([1.0, 1.0, 1.0, 1.0], 4),  # mean 1: far above
        ([0.0, 1.0, 1.0, 0.0], 4),  # mean 0.5: centre of the band
        ([1.0, 0.0, 0.0, 0.0], 8),  # mean 0.25: on the lower edge
        ([1.0, 1.0, 1.0, 0.0], 8),  # mean 0.75: on the upper edge
        ([0.4, 0.4, 0.4, 0.4], 8),  # mean 0.40: exactly 0.15 from the lower edge
        ([0.1, 0.1, 0.1, 0.1], 8),  # mean 0.10: exactly 0.15 below the lower edge
        ([0.45, 0.45, 0.45, 0.45], 4),  # mean 0.45: 0.2 from the lower edge
    ],
)
def test_expands_to_eight_near_a_band_edge(rewards, needed):
    assert RULE.rollouts_needed(rewards) == needed


def test_eight_rollouts_are_final():
    assert RULE.rollouts_needed([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]) == 8


def test_admits_in_band_with_spread():
    d = RULE.decide([1.0, 0.0, 1.0, 0.0], revision=0)
    assert (d.outcome, d.proposer_reward, d.resubmit, d.direction) == ("admitted", 1.0, False, None)
    assert d.mean == 0.5 and d.std == 0.5


def test_band_edges_are_inclusive():
    assert RULE.decide([1, 0, 0, 0, 1, 0, 0, 0], 0).outcome == "admitted"  # mean 0.25
    assert RULE.decide([1, 1, 1, 0, 1, 1, 1, 0], 0).outcome == "admitted"  # mean 0.75


def test_too_hard_sends_back_easier_with_a_diagnostic():
    d = RULE.decide([0.0, 0.0, 0.0, 0.0], revision=0)
    assert (d.outcome, d.resubmit, d.direction, d.diagnostic) == ("too_hard", True, "easier", True)


def test_too_easy_sends_back_harder_without_diagnostic():
    d = RULE.decide([1.0, 1.0, 1.0, 1.0], revision=1)
    assert (d.outcome, d.resubmit, d.direction, d.diagnostic) == ("too_easy", True, "harder", False)


def test_no_spread_in_band():
    d = RULE.decide([0.5, 0.5, 0.5, 0.5], revision=0)
    assert (d.outcome, d.direction) == ("no_spread", "revise")


def test_at_most_two_revisions():
    assert RULE.decide([0.0] * 4, revision=1).resubmit
    final = RULE.decide([0.0] * 4, revision=2)
    assert not final.resubmit and not final.diagnostic and final.outcome == "too_hard"


def test_proposer_reward_is_partial_and_graded_by_distance():
    impossible = RULE.decide([0.0] * 4, 0).proposer_reward
    trivial = RULE.decide([1.0] * 4, 0).proposer_reward
    near_miss = RULE.decide([0.2] * 8, 0).proposer_reward  # mean 0.2, 0.05 below the band
    flat = RULE.decide([0.5] * 4, 0).proposer_reward
    assert impossible == trivial == 0.25
    assert flat == 0.5
    assert 0.25 < near_miss < 0.5
    assert all(0 < r < 1 for r in (impossible, trivial, near_miss, flat))


def test_decide_refuses_an_incomplete_set():
    with pytest.raises(CalibrationRuleError, match="needs 8 rollouts"):
        RULE.decide([1.0, 0.0, 0.0, 0.0], 0)


def test_rewards_outside_unit_interval_are_refused():
    with pytest.raises(CalibrationRuleError, match="rewards must lie in"):
        RULE.rollouts_needed([1.5])


def test_bad_band_is_refused():
    with pytest.raises(CalibrationRuleError, match="band"):
        CalibrationRule(band_low=0.8, band_high=0.2)


def test_flywheel_config_from_env(monkeypatch):
    from aes_lib.flywheel.config import FlywheelConfig, FlywheelConfigError

    monkeypatch.setenv("AES_POOL_CAPACITY", "12")
    monkeypatch.setenv("AES_BAND_LOW", "0.2")
    monkeypatch.setenv("AES_GENERATION_MODE", "prompt")
    c = FlywheelConfig.from_env()
    assert (c.pool_capacity, c.rule.band_low, c.generation_mode) == (12, 0.2, "prompt")
    monkeypatch.setenv("AES_POOL_CAPACITY", "many")
    with pytest.raises(FlywheelConfigError, match="AES_POOL_CAPACITY"):
        FlywheelConfig.from_env()
    monkeypatch.setenv("AES_POOL_CAPACITY", "4")
    monkeypatch.setenv("AES_GENERATION_MODE", "magic")
    with pytest.raises(FlywheelConfigError, match="AES_GENERATION_MODE"):
        FlywheelConfig.from_env()


def test_the_flywheel_solver_gets_its_turn_and_token_limits(tmp_path):
    """Calibration and pool reviews run the solver within ``AES_SOLVER_MAX_TURNS`` and
    ``AES_SOLVER_MAX_TOKENS``: a small model that never stops writes the token cap every turn."""
    import dataclasses

    from aes_lib.config import Settings
    from aes_lib.flywheel.config import FlywheelConfig, FlywheelConfigError
    from aes_lib.runners.trial_runner import TrialRolloutRunner

    settings = dataclasses.replace(Settings.from_env(home=tmp_path), model_url="http://127.0.0.1:9/v1")
    runner = TrialRolloutRunner.from_settings(settings, None, FlywheelConfig(solver_max_turns=2, solver_max_tokens=48))
    assert (runner.limits.max_turns, runner.limits.max_tokens) == (2, 48)
    with pytest.raises(FlywheelConfigError, match="solver_max_tokens"):
        FlywheelConfig(solver_max_tokens=0)
