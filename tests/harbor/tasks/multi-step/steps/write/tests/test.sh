#!/bin/bash
# AES managed verifier: runs every /tests/test_*.py with pytest, offline, and writes
# reward = passed / collected to /logs/verifier/reward.txt (0 if nothing ran).
# Needs python3 and pytest in the image; copy this file unchanged to tests/test.sh.
mkdir -p /logs/verifier
cd /tests || { echo 0 > /logs/verifier/reward.txt; exit 1; }
# --confcutdir: ignore any conftest.py above /tests; no cache provider: leave /tests untouched.
python3 -m pytest /tests -q -rA -p no:cacheprovider --confcutdir=/tests \
    --junitxml=/logs/verifier/junit.xml
status=$?
python3 - <<'PY'
import xml.etree.ElementTree as ET

passed = total = 0
try:
    for case in ET.parse("/logs/verifier/junit.xml").getroot().iter("testcase"):
        total += 1
        # failure, error or skipped: not a pass (a skip must not earn reward).
        passed += not any(child.tag in ("failure", "error", "skipped") for child in case)
except (OSError, ET.ParseError) as e:
    print(f"no junit report: {e}")
reward = passed / total if total else 0.0
with open("/logs/verifier/reward.txt", "w") as f:
    f.write(f"{reward:.6g}\n")
print(f"reward {passed}/{total} = {reward:.6g}")
PY
exit $status
