#!/bin/bash
# Verifier: run every /tests/test_*.py offline and write reward = tests passed / total
# to /logs/verifier/reward.txt (fractional reward; 0 when nothing could be collected).
mkdir -p /logs/verifier
cd /tests || exit 1
# --confcutdir stops pytest from loading a conftest.py planted above /tests;
# -p no:cacheprovider keeps pytest from writing into /tests.
python3 -m pytest /tests -q -rA -p no:cacheprovider --confcutdir=/tests \
  --junitxml=/logs/verifier/junit.xml
python3 - <<'PY'
import xml.etree.ElementTree as ET

try:
    cases = ET.parse("/logs/verifier/junit.xml").getroot().iter("testcase")
    # A case passed when it has no failure/error/skipped child (a teardown error counts once).
    outcomes = [not any(c.tag in ("failure", "error", "skipped") for c in case) for case in cases]
except (OSError, ET.ParseError):
    outcomes = []
reward = sum(outcomes) / len(outcomes) if outcomes else 0.0
with open("/logs/verifier/reward.txt", "w") as f:
    f.write(f"{reward:.6g}\n")
print(f"reward: {sum(outcomes)}/{len(outcomes)} = {reward:.6g}")
PY
