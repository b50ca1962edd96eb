#!/bin/bash
python3 - <<'PY'
import json
values = [int(line) for line in open("/app/readings.txt") if line.strip()]
json.dump({"count": len(values), "max": max(values)}, open("/app/report.json", "w"))
PY
