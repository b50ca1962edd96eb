"""Role-separated advantages: rewards centred within their group, never divided by the std."""

from __future__ import annotations

import math
from collections.abc import Sequence

VARIANCE_EPS = 1e-9
"""Groups whose reward spread is below this carry no signal and are dropped."""


def refusal(reward: float) -> str:
    """Why ``reward`` may not be centred ("" if it may). A reward is a finite number in [0, 1]:
    the verifier refuses any other (``aes_lib.sandbox.trial.parse_reward``); this is the last
    guard, on what the bus carried, because one inf turns a whole group's advantages to nan and
    -inf, and one 1000 outweighs every other group in the batch."""
    if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not (
            math.isfinite(reward) and 0.0 <= reward <= 1.0):
        return f"reward {reward!r} is not a finite number in [0, 1]"
    return ""


def has_signal(rewards: Sequence[float]) -> bool:
    """Whether the rewards vary (DAPO's dynamic sampling keeps only such groups)."""
    return len(rewards) > 1 and max(rewards) - min(rewards) > VARIANCE_EPS


def centred(rewards: Sequence[float]) -> list[float]:
    """``r_i - mean(r)``: the advantage of each attempt in one group.

    Solver groups are the attempts on one environment; proposer groups are the
    proposals for one assignment. Both use plain centring (no std division), so a
    group's advantages sum to zero. A reward ``refusal`` names raises ``ValueError``:
    callers leave such an attempt out first (``Batcher``).
    """
    if not rewards:
        raise ValueError("cannot centre an empty group")
    if bad := [why for r in rewards if (why := refusal(r))]:
        raise ValueError(f"cannot centre the group: {'; '.join(bad)}")
    mean = sum(rewards) / len(rewards)
    return [r - mean for r in rewards]
