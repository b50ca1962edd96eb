#!/bin/bash
# AES managed verifier: runs every /tests/test_*.py with pytest, offline, as the unprivileged
# uid 65533 with the tests' group 65533, runs every program the tests start as uid 65534 without
# that group (it cannot read /tests or reach pytest), and writes reward = passed / collected to
# /logs/verifier/reward.txt (0 if nothing ran). Needs python3, pytest and setpriv in the image;
# copy this file unchanged to tests/test.sh. Why each step: README.md beside the template
# (aes_lib.sandbox.VERIFIER_TEMPLATE) and docs/SECURITY.md.
out=/logs/verifier
mkdir -p "$out" && chmod 700 "$out" /logs
# Identities are numbers (no name is looked up): the tests' group alone reads the tests.
chown -R 0:65533 /tests && chmod -R u=rwX,g=rX,o= /tests && cd /tests || { echo 0 > "$out/reward.txt"; exit 1; }
# pytest's process: the agent's files cannot be imported into it (run them in a subprocess),
# no other process can ptrace it or reach its fd 3, on which it alone reports what it collected
# and each test that passed; none of the agent's bytes becomes code in it once collection ends.
read -r -d '' runner <<'PY'
import ctypes, importlib, json, os, signal, site, subprocess, sys, sysconfig
from importlib.machinery import PathFinder

os.set_inheritable(3, False)
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
AGENT = 65534
if os.getuid() != 0:
    # Files are shared with the agent's programs (the tests hand them folders and read what they
    # wrote), so this process touches files as the agent's uid; as a process (signals, ptrace,
    # /proc) it is uid 65533, which they cannot reach. Per thread: set before any thread starts.
    # Where it holds no CAP_SETUID (gVisor gives no ambient capabilities) this changes nothing,
    # and no program can be started either (as_agent fails): no agent code runs beside the tests.
    for call in (libc.setfsgid, libc.setfsuid):
        call(AGENT)
TRUSTED = tuple(os.path.realpath(p) for p in [*sys.path, "/tests"] if p)
STDLIB = tuple(os.path.realpath(sysconfig.get_paths()[k]) + "/" for k in ("stdlib", "platstdlib"))
SITE = tuple(os.path.realpath(p) + "/" for p in site.getsitepackages())
# The agent's programs run as another uid and cannot signal this process; it ignores every signal
# it can all the same (under AES_TESTS_AS_ROOT nothing of theirs runs), and a test that did not
# report a pass is a failure (the count below).
IGNORED = [s for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD)]
for s in IGNORED:
    try:
        signal.signal(s, signal.SIG_IGN)
    except (OSError, ValueError):
        pass


def as_agent():
    """In each child, before it runs anything: default signals, the agent's uid without the
    tests' group, capabilities or a way to gain privileges (no setuid, no file capabilities), so
    it cannot read /tests nor signal, trace or read the tests' process."""
    for s in IGNORED:
        try:
            signal.signal(s, signal.SIG_DFL)
        except (OSError, ValueError):
            pass
    os.setgroups([])
    os.setresgid(AGENT, AGENT, AGENT)
    os.setresuid(AGENT, AGENT, AGENT)
    for option in ((47, 4), (38, 1)):  # PR_CAP_AMBIENT_CLEAR_ALL, PR_SET_NO_NEW_PRIVS
        if libc.prctl(*option, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl")


if os.getuid() != 0:  # (AES_TESTS_AS_ROOT runs none of the agent's code: the tamper probe checks)
    _popen = subprocess.Popen.__init__

    def _spawn(self, args, *rest, preexec_fn=None, **kw):
        if rest:
            raise TypeError("pass Popen's options by keyword")

        def first():
            as_agent()
            if preexec_fn is not None:
                preexec_fn()
        _popen(self, args, preexec_fn=first, **kw)

    subprocess.Popen.__init__ = _spawn
    SPAWNS = {"os.system", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.forkpty"}
else:
    SPAWNS = set()


class Barrier:
    @staticmethod
    def find_spec(name, path=None, target=None):
        spec = PathFinder.find_spec(name, path)
        where = os.path.realpath(spec.origin) if spec is not None and spec.has_location else None
        if where and not any(where == t or where.startswith(t + "/") for t in TRUSTED):
            raise ImportError(f"the tests may not import {where} (the agent can write it): run it in a subprocess")
        return None


collected = False  # once the tests are collected, no bytes the tests read become code here


def _caller_may_compile():
    """Code compiled from text while the tests run: only by the standard library (dataclasses,
    namedtuple, ast) or an import of a trusted module, never by the tests or a package on the
    agent's text (YAML tags, eval)."""
    frame = sys._getframe(2)
    while frame is not None:
        where = frame.f_code.co_filename
        if where.startswith("<frozen importlib"):
            return True
        if not where.startswith("<"):
            where = os.path.realpath(where)
            return where.startswith(STDLIB) and not where.startswith(SITE)
        frame = frame.f_back
    return False


def audit(event, args):  # spec_from_file_location, runpy, exec(compile(...)) of the agent's files
    if event in SPAWNS:  # they would keep the tests' group: start programs with subprocess
        raise PermissionError(f"{event} is refused in the tests' process: start programs with subprocess")
    if event == "exec" and hasattr(args[0], "co_filename") and not args[0].co_filename.startswith("<"):
        where = os.path.realpath(args[0].co_filename)
        if not any(where == t or where.startswith(t + "/") for t in TRUSTED):
            raise ImportError(f"the tests may not run {where} in their own process: run it in a subprocess")
    if not collected:
        return
    if event in ("pickle.find_class", "code.__new__") or (
            event in ("marshal.loads", "marshal.load") and not sys._getframe(1).f_code.co_filename.startswith("<frozen")):
        raise PermissionError(f"{event} is refused in the tests' process (bytes the agent wrote would become code): "
                              "read such a file in a subprocess and pass the tests plain data")
    if event == "compile" and isinstance(args[0], (str, bytes)) and not _caller_may_compile():
        raise PermissionError("compiling text is refused in the tests' process (it may be the agent's): "
                              "judge the agent's text as data, or run it in a subprocess")


# Loaders that turn a name in a document into a callable or class and call it, with no audit event:
# module -> (what names it, how to read such a file instead, {class ("" for the module): resolvers}).
_PY_TAGS = ("find_python_name", "find_python_module", "make_python_instance")
RESOLVERS = {
    "yaml.constructor": ("python/* YAML tag", "yaml.safe_load", {"FullConstructor": _PY_TAGS, "UnsafeConstructor": _PY_TAGS}),
    "ruamel.yaml.constructor": ("python/* YAML tag", "YAML(typ='safe')", {"Constructor": _PY_TAGS}),
    "jsonpickle.unpickler": ("jsonpickle py/* tag", "json.loads", {"": ("loadclass", "_loadmodule", "loadrepr")}),
}


def _refusal(what, instead):
    def refuse(*args, **kw):
        name = next((a for a in args if isinstance(a, str)), "?")
        raise PermissionError(f"{what} ({name}) is refused in the tests' process (the agent's data would call "
                              f"functions): load the agent's file with {instead}, or in a subprocess")
    return refuse


def disarm_loaders():
    """Once collection ends, every resolver of each installed loader refuses (imported now, so a
    test importing it later gets it disarmed too): no name in the agent's data becomes a callable."""
    for module, (what, instead, owners) in RESOLVERS.items():
        try:
            found = importlib.import_module(module)
        except Exception:  # absent or broken: no test can load with it either
            continue
        for owner, names in owners.items():
            target = getattr(found, owner, None) if owner else found
            for name in names if target is not None else ():
                setattr(target, name, _refusal(what, instead))


sys.meta_path.insert(0, Barrier)
sys.addaudithook(audit)
import pytest


def tell(line):  # to root, on the pipe no other process holds
    os.write(3, (line + "\n").encode())


class Count:
    """Reports, as they happen: the tests collected (before any test ran), each collection error,
    and each test that passed in every phase (at its teardown). Root counts whatever was not
    reported a pass as failed, so a run that dies or is cut short loses the rest."""

    def __init__(self):
        self.spoiled, self.called = set(), set()

    def pytest_collectreport(self, report):
        if report.failed:
            tell("error " + json.dumps(report.nodeid or "<collection>"))

    def pytest_collection_finish(self, session):
        global collected
        tell(f"collected {len(session.items)}")
        disarm_loaders()
        collected = True

    def pytest_runtest_logreport(self, report):
        # failure, error, skip or xfail in any phase: not a pass (a skip must not earn reward).
        if not report.passed or hasattr(report, "wasxfail"):
            self.spoiled.add(report.nodeid)
        elif report.when == "call":
            self.called.add(report.nodeid)
        if report.when == "teardown" and report.nodeid in self.called - self.spoiled:
            tell("pass " + json.dumps(report.nodeid))


sys.exit(pytest.main(sys.argv[1:], plugins=[Count()]))
PY
# The tests run as uid 65533 (files as 65534) with the tests' group and only CAP_SETGID and
# CAP_SETUID (to run their children as uid 65534 without that group), with a fresh HOME: the
# agent's code they run cannot read /tests, write or read $out, signal, trace or read this shell
# or the tests' process, or talk the count out of it, and is killed before the reward is written.
# AES_TESTS_AS_ROOT=1 ([verifier.env]) is for tests that need root and run none of the agent's
# code (e.g. `python3 -I` on a file they check is unchanged); the tamper probes check that.
# git as nobody: no hook or fsmonitor of a repository the agent wrote, and a repository of any
# owner (the trial sets the same; here too, so the template holds under any runner, e.g. Harbor).
export GIT_CONFIG_COUNT=3 GIT_CONFIG_KEY_0=core.hooksPath GIT_CONFIG_VALUE_0=/dev/null \
    GIT_CONFIG_KEY_1=core.fsmonitor GIT_CONFIG_VALUE_1=false GIT_CONFIG_KEY_2=safe.directory GIT_CONFIG_VALUE_2='*'
home=$(mktemp -d) && chown 65534:65534 "$home"
# pytest's temporary folders below one of the file identity's (its default checks the owner by uid)
scratch=$(mktemp -d) && chown 65534:65534 "$scratch" && chmod 1777 "$scratch"
as_tests() { setpriv --reuid=65533 --regid=65533 --groups=65533 --inh-caps=-all,+setgid,+setuid \
    --ambient-caps=-all,+setgid,+setuid --bounding-set=-all,+setgid,+setuid "$@"; }
as_uid() { setpriv --reuid="$1" --regid="$1" --clear-groups --inh-caps=-all --bounding-set=-all "${@:2}"; }
tester=as_tests
[ "${AES_TESTS_AS_ROOT:-0}" = 1 ] && tester=env
counts=$(HOME=$home $tester python3 -I -c "$runner" /tests -q -rA -p no:cacheprovider --confcutdir=/tests \
    --basetemp="$scratch/pytest" 3>&1 1>&2)
status=$?
[ $tester = as_tests ] && for uid in 65534 65533 65534; do as_uid $uid sh -c 'kill -9 -1' 2>/dev/null; done
python3 -I - "$counts" "$status" <<'PY'
import os, sys

# Only what the tests' process reported counts: the tests it collected before any ran, plus
# collection errors, are the total; a pass is a test it reported passed in every phase.
total, errors, passed = 0, set(), set()
for line in sys.argv[1].splitlines():
    word, _, rest = line.partition(" ")
    if word == "collected" and rest.isdigit() and not total:
        total = int(rest)
    elif word in ("error", "pass"):
        (errors if word == "error" else passed).add(rest)
total += len(errors)
reward = min(len(passed), total) / total if total else 0.0
for name in ("reward.json", "reward.txt"):  # only this shell writes the reward
    if os.path.lexists(f"/logs/verifier/{name}"):
        os.remove(f"/logs/verifier/{name}")
with open("/logs/verifier/reward.txt", "w") as f:
    f.write(f"{reward:.6g}\n")
print(f"reward {len(passed)}/{total} = {reward:.6g} (pytest exited {sys.argv[2]})")
PY
exit $status
