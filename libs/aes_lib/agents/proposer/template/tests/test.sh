#!/bin/bash
# Managed verifier: keep as is. Runs every /tests/test_*.py; reward = passed / collected.
mkdir -p /logs/verifier
python3 -m pytest /tests -q -rA -p no:cacheprovider --confcutdir=/tests --junitxml=/logs/verifier/junit.xml
python3 -c '
import xml.etree.ElementTree as ET
try:
    cases = list(ET.parse("/logs/verifier/junit.xml").getroot().iter("testcase"))
except (OSError, ET.ParseError):
    cases = []
ok = sum(1 for c in cases if not any(ch.tag in ("failure", "error", "skipped") for ch in c))
reward = ok / len(cases) if cases else 0.0
open("/logs/verifier/reward.txt", "w").write(f"{reward:.6g}\n")
print(f"reward {ok}/{len(cases)}")
'
