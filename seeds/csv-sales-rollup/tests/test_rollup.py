"""Checks /app/out/monthly_region.csv against the roll-up of the shipped sales export."""

import csv
import re
from pathlib import Path

import pytest

OUT = Path("/app/out/monthly_region.csv")

# region, month, total, distinct orders (computed from the shipped sales.csv)
EXPECTED = """
East 2024-01 12684.02 10
East 2024-02 10726.77 10
East 2024-03 20282.92 13
East 2024-04 11217.37 12
East 2024-05 9288.27 12
East 2024-06 5790.27 9
North 2024-01 17975.43 17
North 2024-02 4518.11 9
North 2024-03 11499.37 12
North 2024-04 4242.19 8
North 2024-05 16629.18 13
North 2024-06 9310.44 12
South 2024-01 9400.54 14
South 2024-02 14968.50 15
South 2024-03 12461.02 11
South 2024-04 10943.07 12
South 2024-05 7013.01 9
South 2024-06 10694.82 10
West 2024-01 19051.54 20
West 2024-02 17130.79 16
West 2024-03 22989.33 20
West 2024-04 11352.83 15
West 2024-05 6279.12 6
West 2024-06 8207.38 15
"""
EXPECTED_ROWS = {(r, m): (float(t), int(n)) for r, m, t, n in (line.split() for line in EXPECTED.strip().splitlines())}


@pytest.fixture(scope="module")
def rows():
    assert OUT.exists(), "/app/out/monthly_region.csv was not written"
    with OUT.open(newline="") as f:
        return list(csv.reader(f))


def test_header(rows):
    assert rows[0] == ["region", "month", "total", "orders"]


def test_one_row_per_region_and_month(rows):
    keys = [(r[0], r[1]) for r in rows[1:]]
    assert len(keys) == len(set(keys))
    assert set(keys) == set(EXPECTED_ROWS)


def test_duplicate_orders_counted_once(rows):
    got = {(r[0], r[1]): int(r[3]) for r in rows[1:]}
    assert got == {k: n for k, (_, n) in EXPECTED_ROWS.items()}


def test_totals_subtract_refunds(rows):
    got = {(r[0], r[1]): float(r[2]) for r in rows[1:]}
    assert set(got) == set(EXPECTED_ROWS)
    for key, (total, _) in EXPECTED_ROWS.items():
        assert got[key] == pytest.approx(total, abs=0.005), key


def test_totals_have_two_decimals(rows):
    assert rows[1:] and all(re.fullmatch(r"-?\d+\.\d\d", r[2]) for r in rows[1:])


def test_sorted_by_region_then_month(rows):
    keys = [(r[0], r[1]) for r in rows[1:]]
    assert keys and keys == sorted(keys)
