#!/bin/bash
# Normalise dates, regions and amounts, drop duplicate order ids, then roll up per region and month.
set -euo pipefail
mkdir -p /app/out
python3 - <<'PY'
import csv, collections, datetime
from decimal import Decimal

def parse_date(text):
    for fmt in ("%Y-%m-%d", "%d/%m/%Y", "%b %d %Y"):
        try:
            return datetime.datetime.strptime(text.strip(), fmt).date()
        except ValueError:
            pass
    raise ValueError(f"unknown date {text!r}")

def parse_amount(text):
    text = text.strip()
    negative = text.startswith("(") and text.endswith(")")
    value = Decimal(text.strip("()").replace("$", "").replace(",", ""))
    return -value if negative else value

totals, counts, seen = collections.defaultdict(Decimal), collections.Counter(), set()
with open("/app/data/sales.csv", newline="") as f:
    for row in csv.DictReader(f):
        if row["order_id"] in seen:
            continue
        seen.add(row["order_id"])
        key = (row["region"].strip().title(), parse_date(row["date"]).strftime("%Y-%m"))
        totals[key] += parse_amount(row["amount"])
        counts[key] += 1
with open("/app/out/monthly_region.csv", "w", newline="") as f:
    out = csv.writer(f, lineterminator="\n")
    out.writerow(["region", "month", "total", "orders"])
    for key in sorted(totals):
        out.writerow([*key, f"{totals[key]:.2f}", counts[key]])
PY
