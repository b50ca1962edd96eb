"""avg@k and its t interval (``aes_ops.evaluation``) against hand-computed and tabulated values."""

from __future__ import annotations

import math

import pytest

from aes_ops.evaluation import avg_at_k, summarize, t_cdf, t_interval, t_quantile, task_mean

# Two-sided 95% critical values of Student's t (any statistics table).
T975 = {1: 12.7062, 2: 4.3027, 3: 3.1824, 4: 2.7764, 9: 2.2622, 10: 2.2281, 30: 2.0423, 120: 1.9799}


@pytest.mark.parametrize("df,expected", sorted(T975.items()))
def test_t_quantile_matches_the_table(df, expected):
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-4)


def test_t_quantile_tails_and_symmetry():
    assert t_quantile(0.995, 1) == pytest.approx(63.6567, abs=1e-3)
    assert t_quantile(0.025, 4) == pytest.approx(-2.7764, abs=1e-4)
    assert t_quantile(0.5, 7) == pytest.approx(0.0, abs=1e-9)
    assert t_quantile(0.975, 100_000) == pytest.approx(1.95996, abs=1e-4)  # tends to the normal
    assert t_cdf(0.0, 3) == pytest.approx(0.5)
    assert t_cdf(1.0, 1) == pytest.approx(0.75)  # Cauchy: 1/2 + atan(1)/pi
    with pytest.raises(ValueError):
        t_quantile(1.0, 3)


def test_avg_at_k_is_the_mean_of_task_means():
    # unequal attempt counts: each task still weighs the same
    assert task_mean([1, 0, 0, 1, 1]) == pytest.approx(0.6)
    assert avg_at_k([[1, 0, 0, 1, 1], [0.5, 0.5], [0.0]]) == pytest.approx((0.6 + 0.5 + 0.0) / 3)
    with pytest.raises(ValueError):
        avg_at_k([])
    with pytest.raises(ValueError):
        task_mean([])


def test_t_interval_by_hand():
    values = [0.2, 0.4, 0.9, 0.5]
    mean = 0.5
    sd = math.sqrt(((0.3**2) + (0.1**2) + (0.4**2) + 0.0) / 3)
    half = T975[3] * sd / 2
    lo, hi = t_interval(values, bounds=None)
    assert (lo, hi) == pytest.approx((mean - half, mean + half), abs=1e-4)
    # clipped to the reward range by default
    assert t_interval(values) == pytest.approx((max(0.0, mean - half), min(1.0, mean + half)), abs=1e-4)
    assert t_interval([0.0, 1.0]) == (0.0, 1.0)
    assert t_interval([0.3, 0.3, 0.3]) == pytest.approx((0.3, 0.3))  # no spread, no width
    assert t_interval([0.7]) is None and t_interval([]) is None


def test_summarize():
    s = summarize([[1.0, 1.0], [0.0, 1.0], [0.0, 0.0]])
    assert s.avg == pytest.approx(0.5) and s.n_tasks == 3
    half = T975[2] * 0.5 / math.sqrt(3)
    assert s.ci95 == pytest.approx((max(0.0, 0.5 - half), min(1.0, 0.5 + half)), abs=1e-4)
    one = summarize([[0.0, 1.0, 1.0]])
    assert one.avg == pytest.approx(2 / 3) and one.ci95 is None and one.n_tasks == 1
    assert summarize([]).avg is None
