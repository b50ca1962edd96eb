"""Role-separated advantages: rewards centred within their group, never divided by the std."""

from __future__ import annotations

from collections.abc import Sequence

VARIANCE_EPS = 1e-9
"""Groups whose reward spread is below this carry no signal and are dropped."""


def has_signal(rewards: Sequence[float]) -> bool:
    """Whether the rewards vary (DAPO's dynamic sampling keeps only such groups)."""
    return len(rewards) > 1 and max(rewards) - min(rewards) > VARIANCE_EPS


def centred(rewards: Sequence[float]) -> list[float]:
    """``r_i - mean(r)``: the advantage of each attempt in one group.

    Solver groups are the attempts on one environment; proposer groups are the
    proposals for one assignment. Both use plain centring (no std division), so a
    group's advantages sum to zero.
    """
    if not rewards:
        raise ValueError("cannot centre an empty group")
    mean = sum(rewards) / len(rewards)
    return [r - mean for r in rewards]
