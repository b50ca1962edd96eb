#!/bin/bash
# AES managed verifier: runs every /tests/test_*.py with pytest, offline, as the unprivileged
# user nobody, and writes reward = passed / collected to /logs/verifier/reward.txt (0 if
# nothing ran). Needs python3, pytest and setpriv in the image; copy this file unchanged to
# tests/test.sh. Why each step: README.md beside the template (aes_lib.sandbox.VERIFIER_TEMPLATE).
out=/logs/verifier
mkdir -p "$out" && chmod 755 "$out"
cd /tests || { echo 0 > "$out/reward.txt"; exit 1; }
# pytest's process: the agent's files cannot be imported into it (run them in a subprocess),
# no other process can ptrace it or reach its fd 3, on which it alone reports "passed total".
read -r -d '' runner <<'PY'
import ctypes, os, sys
from importlib.machinery import PathFinder

os.set_inheritable(3, False)
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
TRUSTED = tuple(os.path.realpath(p) for p in [*sys.path, "/tests"] if p)


class Barrier:
    @staticmethod
    def find_spec(name, path=None, target=None):
        spec = PathFinder.find_spec(name, path)
        where = os.path.realpath(spec.origin) if spec is not None and spec.has_location else None
        if where and not any(where == t or where.startswith(t + "/") for t in TRUSTED):
            raise ImportError(f"the tests may not import {where} (the agent can write it): run it in a subprocess")
        return None


def audit(event, args):  # spec_from_file_location, runpy, exec(compile(...)) of the agent's files
    if event == "exec" and hasattr(args[0], "co_filename") and not args[0].co_filename.startswith("<"):
        where = os.path.realpath(args[0].co_filename)
        if not any(where == t or where.startswith(t + "/") for t in TRUSTED):
            raise ImportError(f"the tests may not run {where} in their own process: run it in a subprocess")


sys.meta_path.insert(0, Barrier)
sys.addaudithook(audit)
import pytest

outcome = {}


class Count:
    def pytest_collectreport(self, report):
        if report.failed:
            outcome[report.nodeid or "<collection>"] = False

    def pytest_runtest_logreport(self, report):
        # failure, error, skip or xfail in any phase: not a pass (a skip must not earn reward).
        ok = report.passed and not hasattr(report, "wasxfail")
        outcome[report.nodeid] = outcome.get(report.nodeid, True) and ok


status = pytest.main(sys.argv[1:], plugins=[Count()])
os.write(3, f"{sum(outcome.values())} {len(outcome)}\n".encode())
sys.exit(status)
PY
# The tests, and all they start, run as nobody with a fresh HOME: the agent's code they run
# cannot write $out or signal this shell, and is killed before the reward is written.
# AES_TESTS_AS_ROOT=1 ([verifier.env]) is for tests that need root and run none of the agent's
# code (e.g. `python3 -I` on a file they check is unchanged); the tamper probes check that.
# git as nobody: no hook or fsmonitor of a repository the agent wrote, and a repository of any
# owner (the trial sets the same; here too, so the template holds under any runner, e.g. Harbor).
export GIT_CONFIG_COUNT=3 GIT_CONFIG_KEY_0=core.hooksPath GIT_CONFIG_VALUE_0=/dev/null \
    GIT_CONFIG_KEY_1=core.fsmonitor GIT_CONFIG_VALUE_1=false GIT_CONFIG_KEY_2=safe.directory GIT_CONFIG_VALUE_2='*'
home=$(mktemp -d) && chown 65534:65534 "$home"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all "$@"; }
tester=as_nobody
[ "${AES_TESTS_AS_ROOT:-0}" = 1 ] && tester=env
counts=$(HOME=$home $tester python3 -I -c "$runner" /tests -q -rA -p no:cacheprovider --confcutdir=/tests 3>&1 1>&2)
status=$?
[ $tester = as_nobody ] && for _ in 1 2 3; do as_nobody sh -c 'kill -9 -1' 2>/dev/null; done
read -r passed total <<< "$counts"
python3 -I - "${passed:-0}" "${total:-0}" <<'PY'
import sys

passed, total = (int(n) if n.isdigit() else 0 for n in sys.argv[1:3])
reward = passed / total if total else 0.0
with open("/logs/verifier/reward.txt", "w") as f:
    f.write(f"{reward:.6g}\n")
print(f"reward {passed}/{total} = {reward:.6g}")
PY
exit $status
