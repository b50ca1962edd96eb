"""The pools experiment's power analysis (``aes_ops.power``) against published sample sizes."""

from __future__ import annotations

import math

import pytest

from aes_ops.power import detectable, sd_difference, seeds_needed


@pytest.mark.parametrize(("effect", "seeds"), [(1.0, 10), (0.5, 34), (2.0, 5)])
def test_seeds_match_the_paired_t_tables(effect, seeds):
    """Cohen's tables for a two-sided paired t test at alpha 0.05, power 0.8: d = 1 needs 10
    pairs, d = 0.5 needs 34, d = 2 needs 5 (the noncentral-t values; ours are within one)."""
    assert abs(seeds_needed(sd=0.1 / effect, delta=0.1) - seeds) <= 1


def test_more_seeds_detect_less_and_one_seed_detects_nothing():
    found = [detectable(0.1, n) for n in range(2, 12)]
    assert found == sorted(found, reverse=True)
    assert detectable(0.1, 1) == math.inf
    n = seeds_needed(0.1, 0.1)
    assert detectable(0.1, n) <= 0.1 < detectable(0.1, n - 1)


def test_the_difference_has_an_evaluation_and_a_training_part():
    # 64 attempts of variance 0.1 per arm, no training spread: sqrt(2 * 0.1 / 64)
    assert sd_difference(0.1, 32, 2, 0.0) == pytest.approx(math.sqrt(0.2 / 64))
    assert sd_difference(0.1, 32, 2, 0.01) == pytest.approx(math.sqrt(0.2 / 64 + 0.02))
    with pytest.raises(ValueError, match="instances and attempts"):
        sd_difference(0.1, 0, 2, 0.0)
    with pytest.raises(ValueError, match="delta"):
        seeds_needed(0.1, 0.0)
