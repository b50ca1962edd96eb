"""Checks /app/out/discrepancies.csv against finance's reconciliation of the shipped exports.
Every check reads the file, so an attempt that writes nothing earns 0."""

import csv
from pathlib import Path

import pytest

OUT = Path("/app/out/discrepancies.csv")
HEADER = ["txn_id", "issue", "processor_amount", "ledger_amount"]
EXPECTED = [
    ["T1003", "amount_mismatch", "4000", "4020"],
    ["T1004", "amount_mismatch", "1500", "1590"],
    ["T1006", "missing_in_ledger", "1200", ""],
    ["T1007", "missing_in_ledger", "725", ""],
    ["T1009", "amount_mismatch", "5000", "5200"],
    ["T1010", "missing_in_processor", "", "500"],
    ["T1014", "amount_mismatch", "6000", "6007"],
]


@pytest.fixture(scope="module")
def rows():
    assert OUT.is_file(), f"{OUT} was not written"
    with OUT.open(newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    assert rows and rows[0] == HEADER, f"header must be {','.join(HEADER)}"
    return rows[1:]


def _of(rows, issue):
    return sorted(r for r in rows if len(r) == 4 and r[1] == issue)


def test_amount_mismatches(rows):
    assert _of(rows, "amount_mismatch") == _of(EXPECTED, "amount_mismatch")


def test_missing_in_ledger(rows):
    assert _of(rows, "missing_in_ledger") == _of(EXPECTED, "missing_in_ledger")


def test_flagged_transactions(rows):
    assert sorted({r[0] for r in rows}) == sorted(r[0] for r in EXPECTED)


def test_whole_report_in_order(rows):
    assert rows == EXPECTED
