#!/bin/bash
# Reconcile by finance's policy: a tolerance in cents, the reconciled statuses, the latest-posted
# ledger entry of a duplicate, and amounts written as integer cents.
set -euo pipefail
mkdir -p /app/out
python3 - <<'PY'
import csv
from decimal import Decimal

TOLERANCE_CENTS = 5
IN_SCOPE = {"settled", "refunded"}
DUPLICATES = "latest_posted"
AMOUNT_STYLE = "cents"


def cents(text):
    return int(Decimal(text) * 100)


def written(value):
    if value is None:
        return ""
    return str(value) if AMOUNT_STYLE == "cents" else f"{Decimal(value) / 100:.2f}"


with open("/app/data/processor.csv", newline="") as f:
    processor = {r["txn_id"]: r for r in csv.DictReader(f)}
ledger = {}
with open("/app/data/ledger.csv", newline="") as f:
    for r in csv.DictReader(f):
        kept = ledger.get(r["txn_id"])
        if kept is None or (DUPLICATES == "latest_posted" and r["posted_at"] > kept["posted_at"]):
            ledger[r["txn_id"]] = r

rows = []
for txn, p in processor.items():
    if p["status"] not in IN_SCOPE:
        continue
    if txn not in ledger:
        rows.append((txn, "missing_in_ledger", cents(p["amount"]), None))
    elif abs(cents(p["amount"]) - cents(ledger[txn]["amount"])) > TOLERANCE_CENTS:
        rows.append((txn, "amount_mismatch", cents(p["amount"]), cents(ledger[txn]["amount"])))
for txn, l in ledger.items():
    if txn not in processor:
        rows.append((txn, "missing_in_processor", None, cents(l["amount"])))

with open("/app/out/discrepancies.csv", "w", newline="") as f:
    out = csv.writer(f, lineterminator="\n")
    out.writerow(["txn_id", "issue", "processor_amount", "ledger_amount"])
    for txn, issue, p, l in sorted(rows):
        out.writerow([txn, issue, written(p), written(l)])
PY
