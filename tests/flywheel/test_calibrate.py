"""The calibration driver: rollout budget in practice and the diagnostic attempt."""

from aes_lib.flywheel.calibrate import DIAGNOSTIC, calibrate
from aes_lib.flywheel.calibration import CalibrationRule
from aes_lib.flywheel.revision import RolloutEvidence


def _hints(text):
    async def hints():
        return text

    return hints


def _scripted(rewards):
    calls = []

    async def rollout(i, hints):
        calls.append((i, hints))
        return RolloutEvidence(1.0 if i == DIAGNOSTIC else rewards[i], "" if i == DIAGNOSTIC else "f")

    return rollout, calls


async def test_clear_case_stops_at_four():
    rollout, calls = _scripted([1, 0, 1, 0, 1, 1, 1, 1])
    c = await calibrate(CalibrationRule(), 0, rollout, _hints("hint"))
    assert c.decision.outcome == "admitted" and [i for i, _ in calls] == [0, 1, 2, 3]




async def test_edge_case_expands_to_eight_and_too_hard_gets_a_diagnostic_with_hints():
    rollout, calls = _scripted([1, 0, 0, 0, 0, 0, 0, 0])  # 0.25 after 4, 0.125 after 8
    c = await calibrate(CalibrationRule(), 0, rollout, _hints("the reference solution"))
    assert [i for i, _ in calls] == [0, 1, 2, 3, 4, 5, 6, 7, DIAGNOSTIC]
    assert calls[-1][1] == "the reference solution"
    assert c.decision.outcome == "too_hard" and c.diagnostic.reward == 1.0 and len(c.rollouts) == 8


async def test_final_revision_skips_the_diagnostic():
    rollout, calls = _scripted([0, 0, 0, 0])
    c = await calibrate(CalibrationRule(), 2, rollout, _hints("x"))
    assert c.diagnostic is None and DIAGNOSTIC not in [i for i, _ in calls]


async def test_without_a_reference_no_passing_attempt_keeps_the_task_out_and_fetches_no_hints():
    rollout, calls = _scripted([0, 0.5, 0, 0.5, 0, 0, 0, 0])  # partial credit is no pass

    async def no_hints():
        raise AssertionError("a task without a reference solution has no hints to fetch")

    c = await calibrate(CalibrationRule(), 0, rollout, no_hints, no_reference=True)
    assert (c.decision.outcome, c.decision.resubmit, c.decision.proposer_reward) == ("unverified_too_hard", False, 0.0)
    assert c.diagnostic is None and DIAGNOSTIC not in [i for i, _ in calls]


async def test_without_a_reference_one_passing_attempt_admits_outside_the_band():
    rollout, _ = _scripted([1, 0, 0, 0, 0, 0, 0, 0])  # mean 0.125: too_hard for a generated task
    c = await calibrate(CalibrationRule(), 0, rollout, _hints("x"), no_reference=True)
    assert c.decision.outcome == "admitted" and not c.decision.resubmit
    generated = await calibrate(CalibrationRule(), 0, _scripted([1, 0, 0, 0, 0, 0, 0, 0])[0], _hints("x"))
    assert generated.decision.outcome == "too_hard"
