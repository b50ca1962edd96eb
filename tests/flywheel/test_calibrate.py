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
