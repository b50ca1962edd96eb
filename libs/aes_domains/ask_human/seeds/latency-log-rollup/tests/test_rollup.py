"""Checks /app/out/rollup.csv against the team's roll-up of the shipped access log.
Every check reads the file, so an attempt that writes nothing earns 0."""

import csv
from pathlib import Path

import pytest

OUT = Path("/app/out/rollup.csv")
HEADER = ["bucket_start", "requests", "errors"]
# bucket_start (UTC+05:30, 15 minutes), requests and server errors without /healthz
EXPECTED = [
    ["2024-05-01 23:15", "4", "0"],
    ["2024-05-01 23:30", "4", "1"],
    ["2024-05-01 23:45", "5", "0"],
    ["2024-05-02 00:00", "4", "1"],
    ["2024-05-02 00:15", "6", "0"],
    ["2024-05-02 00:30", "5", "1"],
    ["2024-05-02 00:45", "4", "1"],
    ["2024-05-02 01:00", "6", "1"],
]


@pytest.fixture(scope="module")
def rows():
    assert OUT.is_file(), f"{OUT} was not written"
    with OUT.open(newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    assert rows and rows[0] == HEADER, f"header must be {','.join(HEADER)}"
    return rows[1:]


def test_buckets(rows):
    assert sorted(r[0] for r in rows) == [r[0] for r in EXPECTED]


def test_request_counts(rows):
    assert {r[0]: r[1] for r in rows if len(r) == 3} == {r[0]: r[1] for r in EXPECTED}


def test_error_counts(rows):
    assert {r[0]: r[2] for r in rows if len(r) == 3} == {r[0]: r[2] for r in EXPECTED}


def test_whole_rollup_in_order(rows):
    assert rows == EXPECTED
