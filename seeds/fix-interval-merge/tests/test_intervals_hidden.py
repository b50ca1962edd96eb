"""Behaviour of the repaired interval library in /app, run in a child process (the library is
the solver's code: it never runs inside the tests' own process)."""

import json
import subprocess
import sys


def call(expr: str):
    """``expr`` (using merge, gaps, total_length) evaluated in a child, as JSON."""
    code = f"import json, sys; sys.path.insert(0, '/app'); from intervals import *; print(json.dumps({expr}))"
    result = subprocess.run([sys.executable, "-I", "-B", "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


def pairs(value):
    return [tuple(p) for p in value]


def test_original_test_suite_passes():
    # --noconftest: a conftest.py the solver adds must not decide whether its own suite passes.
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--noconftest", "tests"],
                            cwd="/app", capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-2000:]


def test_merge_unsorted_input():
    assert pairs(call("merge([(8, 9), (1, 3), (2, 4)])")) == [(1, 4), (8, 9)]


def test_merge_touching_intervals():
    assert pairs(call("merge([(1, 3), (3, 5), (7, 8)])")) == [(1, 5), (7, 8)]


def test_merge_contained_interval_does_not_shrink():
    assert pairs(call("merge([(0, 10), (2, 3), (4, 12)])")) == [(0, 12)]


def test_merge_does_not_modify_input():
    assert pairs(call("(lambda d: (merge(d), d)[1])([(5, 6), (1, 2)])")) == [(5, 6), (1, 2)]


def test_total_length_with_nested_and_unsorted():
    assert call("total_length([(10, 20), (0, 5), (12, 14), (4, 6)])") == 16


def test_gaps_clip_to_window():
    assert pairs(call("gaps([(-5, 2), (4, 6), (9, 30), (40, 50)], 0, 10)")) == [(2, 4), (6, 9)]


def test_gaps_ignore_intervals_past_the_window():
    assert pairs(call("gaps([(2, 3), (12, 15)], 0, 10)")) == [(0, 2), (3, 10)]


def test_gaps_window_fully_covered():
    assert call("gaps([(5, 20), (0, 6)], 0, 10)") == []
