"""How many seeds the pools experiment needs to tell its arms apart, and what a finished run
could have told apart (issue 37).

The comparison is paired: both arms of a seed start from the same policy and their held-out
evaluations draw the same random numbers, so the unit is the per-seed difference ``D`` of
held-out mean reward (arm minus baseline arm). With ``n`` seeds, a two-sided paired t test at
level ``alpha`` has power ``power`` against a true difference ``delta`` when

    (t[1 - alpha/2, n-1] + t[power, n-1]) * sd(D) / sqrt(n) <= delta

(the usual normal-approximation formula with t quantiles in place of z, which is close for
the small ``n`` here and errs towards more seeds). ``sd(D)`` has two parts:

- the evaluation's sampling noise: each arm's score is a mean over ``instances * attempts``
  draws; with per-attempt variance ``var_attempt`` the difference of two such means has variance
  ``2 * var_attempt / (instances * attempts)`` at most (less when the paired draws agree);
- the training's own spread: two runs of one arm from one policy end at different scores, with
  variance ``var_training`` each, the difference ``2 * var_training``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

from aes_lib.flywheel.readouts import endpoint
from aes_ops.evaluation import t_interval, t_quantile

MAX_SEEDS = 10_000


def sd_difference(var_attempt: float, instances: int, attempts: int, var_training: float) -> float:
    """Standard deviation of one seed's paired difference (independent arms: the upper end)."""
    if min(instances, attempts) < 1 or var_attempt < 0 or var_training < 0:
        raise ValueError("instances and attempts must be >= 1 and variances >= 0")
    return math.sqrt(2 * var_attempt / (instances * attempts) + 2 * var_training)


def detectable(sd: float, seeds: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest true difference ``seeds`` paired seeds detect with ``power`` (inf below 2)."""
    if seeds < 2:
        return math.inf
    return (t_quantile(1 - alpha / 2, seeds - 1) + t_quantile(power, seeds - 1)) * sd / math.sqrt(seeds)


def paired_summary(diffs: Sequence[float]) -> dict:
    """Per-seed paired differences summarised: their number, mean, 95% t interval (clipped to
    [-1, 1]), sd, and the smallest difference that many seeds detect at that sd (``detectable``);
    each None where the differences are too few for it."""
    sd = statistics.stdev(diffs) if len(diffs) > 1 else None
    ci = t_interval(diffs, bounds=(-1.0, 1.0))
    return {"seeds": len(diffs), "difference": statistics.fmean(diffs) if diffs else None,
            "ci95": list(ci) if ci else None, "sd": sd,
            "detectable": detectable(sd, len(diffs)) if sd is not None else None}


def read_out(arm: str, baseline: str, curves: Mapping[int, Sequence[float | None]],
             base: Mapping[int, Sequence[float | None]], name: str) -> dict:
    """``arm`` minus ``baseline`` on the endpoint ``name`` (``aes_lib.flywheel.readouts.endpoint``),
    seed by seed over the seeds both ran (``curves`` and ``base``: seed -> held-out mean reward at
    each point) and read: ``paired_summary`` of the differences, named."""
    diffs = [a - b for seed, curve in curves.items() if seed in base
             and None not in (a := endpoint(curve, name), b := endpoint(base[seed], name))]
    return {"arm": arm, "baseline": baseline, "endpoint": name, **paired_summary(diffs)}


def seeds_needed(sd: float, delta: float = 0.1, alpha: float = 0.05, power: float = 0.8) -> int:
    """Fewest paired seeds that detect ``delta`` with ``power`` at level ``alpha``."""
    if delta <= 0 or sd < 0:
        raise ValueError("delta must be > 0 and sd >= 0")
    n = 2
    while detectable(sd, n, alpha, power) > delta:
        n += 1
        if n > MAX_SEEDS:
            raise ValueError(f"more than {MAX_SEEDS} seeds: sd {sd} is too large for delta {delta}")
    return n


def attempt_variance(rewards: Sequence[float]) -> float:
    """Per-attempt variance of held-out rewards (sample variance; 0 for fewer than two)."""
    return statistics.variance(rewards) if len(rewards) > 1 else 0.0
