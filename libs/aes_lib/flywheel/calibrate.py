"""Driving the calibration rule: run rollouts until it decides, then the diagnostic.

``rollout(i, hints)`` runs solver attempt ``i`` (``hints`` set for the diagnostic
attempt) and must be idempotent per ``i`` so a redelivered candidate resumes
instead of paying for its rollouts twice (the calibrator caches them in KV).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable

from aes_lib.flywheel.calibration import CalibrationRule, Decision
from aes_lib.flywheel.revision import RolloutEvidence

DIAGNOSTIC = -1
"""Rollout index of the diagnostic attempt."""

Rollout = Callable[[int, str | None], Awaitable[RolloutEvidence]]


@dataclasses.dataclass(frozen=True)
class Calibration:
    decision: Decision
    rollouts: tuple[RolloutEvidence, ...]
    diagnostic: RolloutEvidence | None


async def calibrate(
    rule: CalibrationRule, revision: int, rollout: Rollout, hints: Callable[[], Awaitable[str]],
    *, no_reference: bool = False,
) -> Calibration:
    """Run ``rule.initial_rollouts`` attempts, more if the rule asks, decide, and run one
    diagnostic attempt with ``await hints()`` (the reference solution, fetched only then)
    when the decision wants it. ``no_reference``: the task has no reference solution, so
    the attempts decide whether it is solvable at all (``CalibrationRule.decide_unverified``)."""
    done: list[RolloutEvidence] = []
    while len(done) < rule.rollouts_needed([r.reward for r in done]):
        done.append(await rollout(len(done), None))
    rewards = [r.reward for r in done]
    decision = rule.decide_unverified(rewards) if no_reference else rule.decide(rewards, revision)
    diagnostic = await rollout(DIAGNOSTIC, await hints()) if decision.diagnostic else None
    return Calibration(decision, tuple(done), diagnostic)
