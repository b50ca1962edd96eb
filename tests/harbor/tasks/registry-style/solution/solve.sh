#!/bin/bash
python3 - <<'PY'
import csv
with open("/app/orders.csv") as f:
    total = sum(int(row["quantity"]) for row in csv.DictReader(f))
open("/app/summary.txt", "w").write(f"{total}\n")
PY
