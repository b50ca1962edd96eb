#!/bin/bash
# Pass 1 pairs by invoice reference (match or discrepancy); pass 2 pairs by exact amount within 3 days.
set -euo pipefail
python3 - <<'PY'
import csv, datetime, json, re

with open("/app/data/bank.csv", newline="") as f:
    bank = list(csv.DictReader(f, delimiter=";"))
for line in bank:
    line["day"] = datetime.datetime.strptime(line["booking_date"], "%d.%m.%Y").date()
    line["cents"] = int(line["amount"].replace(".", "").replace(",", ""))
ledger = json.load(open("/app/data/ledger.json"))
for entry in ledger:
    entry["day"] = datetime.date.fromisoformat(entry["date"])
bank.sort(key=lambda b: b["id"])
ledger.sort(key=lambda e: e["id"])

matched, discrepancies, used_bank, used_ledger = [], [], set(), set()
for line in bank:
    for entry in ledger:
        if entry["invoice"] and entry["id"] not in used_ledger and re.search(
                rf"(?<![\w-]){re.escape(entry['invoice'])}(?![\w-])", line["description"], re.IGNORECASE):
            used_bank.add(line["id"]); used_ledger.add(entry["id"])
            if line["cents"] == entry["amount_cents"]:
                matched.append({"bank_id": line["id"], "ledger_id": entry["id"], "rule": "reference"})
            else:
                discrepancies.append({"bank_id": line["id"], "ledger_id": entry["id"],
                                      "bank_cents": line["cents"], "ledger_cents": entry["amount_cents"]})
            break
for line in bank:
    if line["id"] in used_bank:
        continue
    candidates = [e for e in ledger if e["id"] not in used_ledger and e["amount_cents"] == line["cents"]
                  and abs((e["day"] - line["day"]).days) <= 3]
    if candidates:
        best = min(candidates, key=lambda e: (abs((e["day"] - line["day"]).days), e["id"]))
        used_bank.add(line["id"]); used_ledger.add(best["id"])
        matched.append({"bank_id": line["id"], "ledger_id": best["id"], "rule": "amount_date"})
report = {
    "matched": sorted(matched, key=lambda m: m["bank_id"]),
    "discrepancies": sorted(discrepancies, key=lambda d: d["bank_id"]),
    "unmatched_bank": sorted(b["id"] for b in bank if b["id"] not in used_bank),
    "unmatched_ledger": sorted(e["id"] for e in ledger if e["id"] not in used_ledger),
}
json.dump(report, open("/app/reconciliation.json", "w"), indent=2)
PY
