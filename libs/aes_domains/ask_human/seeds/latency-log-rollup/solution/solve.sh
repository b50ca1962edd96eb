#!/bin/bash
# Roll the access log up by the team's conventions: fixed-length buckets in the team's UTC offset,
# server errors as failures, health checks left out.
set -euo pipefail
mkdir -p /app/out
python3 - <<'PY'
import collections
import csv
import datetime
import re

BUCKET_MINUTES = 15
UTC_OFFSET_MINUTES = 330
ERROR_MIN_STATUS = 500
SKIPPED_PATHS = {"/healthz"}

LINE = re.compile(r"^(\S+)Z .*\bpath=(\S+) status=(\d+)")
requests, errors = collections.Counter(), collections.Counter()
with open("/app/logs/access.log") as f:
    for line in f:
        m = LINE.match(line)
        if not m or m.group(2) in SKIPPED_PATHS:
            continue
        local = datetime.datetime.fromisoformat(m.group(1)) + datetime.timedelta(minutes=UTC_OFFSET_MINUTES)
        start = local.replace(minute=local.minute - local.minute % BUCKET_MINUTES, second=0)
        requests[start] += 1
        errors[start] += int(m.group(3)) >= ERROR_MIN_STATUS

with open("/app/out/rollup.csv", "w", newline="") as f:
    out = csv.writer(f, lineterminator="\n")
    out.writerow(["bucket_start", "requests", "errors"])
    for start in sorted(requests):
        out.writerow([start.strftime("%Y-%m-%d %H:%M"), requests[start], errors[start]])
PY
