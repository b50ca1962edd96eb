#!/bin/bash
# Sort before merging, merge touching/contained intervals with max(), and clip gaps to [lo, hi].
set -euo pipefail
python3 - <<'PY'
from pathlib import Path

path = Path("/app/intervals/core.py")
src = path.read_text()
fixes = [
    ("    for start, end in intervals:\n        if merged and start < merged[-1][1]:\n"
     "            merged[-1] = (merged[-1][0], end)\n",
     "    for start, end in sorted(intervals):\n        if merged and start <= merged[-1][1]:\n"
     "            merged[-1] = (merged[-1][0], max(merged[-1][1], end))\n"),
    ("    for start, end in merge(intervals):\n        if start > cursor:\n",
     "    for start, end in merge(intervals):\n        start, end = max(start, lo), min(end, hi)\n"
     "        if start > end:\n            continue\n        if start > cursor:\n"),
]
for old, new in fixes:
    assert old in src, old
    src = src.replace(old, new)
path.write_text(src)
PY
