"""Behaviour of the repaired interval library in /app (imported from there)."""

import subprocess
import sys

sys.path.insert(0, "/app")

from intervals import gaps, merge, total_length  # noqa: E402


def test_original_test_suite_passes():
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                            cwd="/app", capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-2000:]


def test_merge_unsorted_input():
    assert merge([(8, 9), (1, 3), (2, 4)]) == [(1, 4), (8, 9)]


def test_merge_touching_intervals():
    assert merge([(1, 3), (3, 5), (7, 8)]) == [(1, 5), (7, 8)]


def test_merge_contained_interval_does_not_shrink():
    assert merge([(0, 10), (2, 3), (4, 12)]) == [(0, 12)]


def test_merge_does_not_modify_input():
    data = [(5, 6), (1, 2)]
    merge(data)
    assert data == [(5, 6), (1, 2)]


def test_total_length_with_nested_and_unsorted():
    assert total_length([(10, 20), (0, 5), (12, 14), (4, 6)]) == 16


def test_gaps_clip_to_window():
    assert gaps([(-5, 2), (4, 6), (9, 30), (40, 50)], 0, 10) == [(2, 4), (6, 9)]


def test_gaps_ignore_intervals_past_the_window():
    assert gaps([(2, 3), (12, 15)], 0, 10) == [(0, 2), (3, 10)]


def test_gaps_window_fully_covered():
    assert gaps([(5, 20), (0, 6)], 0, 10) == []
