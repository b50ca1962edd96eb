#!/bin/bash
# Floor division is exact for integers and rounds toward -inf; int(ts / width) goes through
# a float and truncates toward zero.
set -euo pipefail
cd /app/repo
python3 - <<'PY'
from pathlib import Path

p = Path("tsbucket/windows.py")
src = p.read_text()
old = "    return int(ts / width) * width\n"
assert src.count(old) == 1, "bucket_start's body is not the expected one"
p.write_text(src.replace(old, "    return ts // width * width\n"))
PY
python3 -m pytest -q -p no:cacheprovider tests
