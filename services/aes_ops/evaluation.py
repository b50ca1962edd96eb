"""Statistics of a benchmark evaluation: avg@k and its confidence interval.

avg@k (Terminal-Bench's reported metric, k = 5 in the paper) is the mean over tasks
of each task's mean reward over k independent attempts. Its uncertainty comes
mostly from which tasks are in the benchmark, so the interval is a Student-t
interval over the per-task means (tasks are the sampled units; attempts only
sharpen each task's mean). With fewer than two tasks there is no between-task
spread to estimate, and the interval is undefined (``None``).

No scipy: the t quantile is computed from the regularized incomplete beta function.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence


def task_mean(rewards: Sequence[float]) -> float:
    """Mean reward of one task's attempts."""
    if not rewards:
        raise ValueError("a task needs at least one attempt")
    return math.fsum(rewards) / len(rewards)


def avg_at_k(per_task: Sequence[Sequence[float]]) -> float:
    """Mean over tasks of the per-task mean reward (each task weighs the same,
    whatever its number of attempts)."""
    if not per_task:
        raise ValueError("avg@k needs at least one task")
    return math.fsum(task_mean(r) for r in per_task) / len(per_task)


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for num in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                    -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):  # the continued fraction converges fast on this side
        return math.exp(ln_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(ln_front) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df}")
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The t value with ``t_cdf(t, df) == p`` (bisection; accurate to ~1e-10)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:  # df = 1 at p = 0.999 needs ~318
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def t_interval(
    values: Sequence[float], confidence: float = 0.95, bounds: tuple[float, float] | None = (0.0, 1.0)
) -> tuple[float, float] | None:
    """Two-sided Student-t interval of the mean of ``values``; ``None`` for fewer than two.

    Clipped to ``bounds`` (rewards lie in [0, 1], and a t interval of a few bounded
    values can overshoot them); pass ``None`` to keep the raw interval.
    """
    n = len(values)
    if n < 2:
        return None
    mean = math.fsum(values) / n
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * sd / math.sqrt(n)
    lo, hi = mean - half, mean + half
    if bounds is not None:
        lo, hi = max(bounds[0], lo), min(bounds[1], hi)
    return (lo, hi)


@dataclasses.dataclass(frozen=True)
class Summary:
    """avg@k over the scored tasks and its 95% t interval (``None`` below two tasks)."""

    avg: float | None
    ci95: tuple[float, float] | None
    n_tasks: int


def summarize(per_task: Sequence[Sequence[float]]) -> Summary:
    """avg@k and the 95% interval over tasks; an empty input gives ``avg=None``."""
    if not per_task:
        return Summary(None, None, 0)
    return Summary(avg_at_k(per_task), t_interval([task_mean(r) for r in per_task]), len(per_task))
