"""Compares /app/reconciliation.json with the reconciliation of the shipped statement (expected.json)."""

import json
from pathlib import Path

import pytest

EXPECTED = json.loads((Path(__file__).parent / "expected.json").read_text())


@pytest.fixture(scope="module")
def report():
    path = Path("/app/reconciliation.json")
    assert path.exists(), "/app/reconciliation.json missing"
    return json.loads(path.read_text())


def pairs(items, rule=None):
    return {(m["bank_id"], m["ledger_id"]) for m in items if rule is None or m.get("rule") == rule}


def test_reference_matches(report):
    assert pairs(report["matched"], "reference") == pairs(EXPECTED["matched"], "reference")


def test_amount_date_matches(report):
    assert pairs(report["matched"], "amount_date") == pairs(EXPECTED["matched"], "amount_date")


def test_ties_go_to_closest_date_then_lowest_id(report):
    # Two -49.90 entries equally close (lower id wins); two -120.00 entries 1 and 2 days away (closer wins).
    assert {("B-019", "L-039"), ("B-039", "L-041")} <= pairs(report["matched"])


def test_discrepancies(report):
    assert report["discrepancies"] == EXPECTED["discrepancies"]


def test_referenced_line_not_rematched_by_amount(report):
    # B-009 cites INV-2101 (700.00) but paid 697.50, which equals the unreferenced entry L-047.
    assert ("B-009", "L-047") not in pairs(report["matched"]) and "L-047" in report["unmatched_ledger"]


def test_unmatched_bank(report):
    assert report["unmatched_bank"] == EXPECTED["unmatched_bank"]


def test_unmatched_ledger(report):
    assert report["unmatched_ledger"] == EXPECTED["unmatched_ledger"]


def test_lists_sorted_and_every_id_used_once(report):
    assert [m["bank_id"] for m in report["matched"]] == sorted(m["bank_id"] for m in report["matched"])
    bank_ids = [m["bank_id"] for m in report["matched"] + report["discrepancies"]] + report["unmatched_bank"]
    ledger_ids = [m["ledger_id"] for m in report["matched"] + report["discrepancies"]] + report["unmatched_ledger"]
    assert sorted(bank_ids) == sorted({*bank_ids}) and len(bank_ids) == 50
    assert sorted(ledger_ids) == sorted({*ledger_ids}) and len(ledger_ids) == 50
