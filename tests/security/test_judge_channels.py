"""Channels through which the agent's data reached the judge's own reads and code (docs/SECURITY.md,
"Channels": *identity*, *deserialization*, *environment*, and the tamper probe for a hand-written
test.sh). Each attack is written as a policy would write it, none doing the task's work; each earned
1.0 through the trial path on ``ledger-sum`` (or the variant built here) before its mechanism, and
earns 0 now, or its task is refused at admission where the harness cannot stop root's own reads.
The honest solution of the same task, under the same verifier, earns 1.0.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from aes_lib.bundle import Task
from aes_lib.sandbox import run_trial, validate_task
from aes_lib.sandbox.screen import forgery_signs
from aes_lib.sandbox.trial import OracleAgent, TrialResult

pytestmark = [pytest.mark.docker]

TASK = Path(__file__).parent / "tasks" / "ledger-sum"
SUM = "n=$(python3 -c \"print(sum(int(l) for l in open('/app/ledger.txt') if l.strip()))\")\n"


def _task(tmp_path: Path, solve: str, *, tests: str | None = None, test_sh: str | None = None) -> Path:
    root = tmp_path / "task"
    shutil.copytree(TASK, root)
    if tests is not None:
        (root / "tests" / "test_ledger.py").write_text(tests)
    if test_sh is not None:
        (root / "tests" / "test.sh").write_text(test_sh)
    (root / "solution" / "solve.sh").write_text("#!/bin/bash\n" + solve)
    return root


async def _earns(tmp_path: Path, solve: str, images, test_label, **verifier) -> TrialResult:
    task = Task.load(_task(tmp_path, solve, **verifier))
    r = await run_trial(task, OracleAgent(task), images, labels=test_label)
    assert r.agent.exit_code == 0, r.log()  # the attack was carried out
    return r


# --- identity: what the agent's programs write while the tests run is data, never a way into /tests

# The tests hand the program an output path and compare what it wrote with the expected file.
OUTPUT_TESTS = '''import subprocess
from pathlib import Path

EXPECTED = Path(__file__).parent / "expected.txt"


def test_program_writes_the_sum(tmp_path):
    out = tmp_path / "report.txt"
    r = subprocess.run(["/app/solve", str(out)], capture_output=True, text=True, timeout=60, cwd="/tmp")
    assert out.read_text().strip() == EXPECTED.read_text().strip(), r.stderr
'''
# The same, waiting for a report the program may finish in the background.
POLLING_TESTS = '''import subprocess
import time
from pathlib import Path

EXPECTED = (Path(__file__).parent / "expected.txt").read_text().strip()


def test_program_reports_the_sum(tmp_path):
    out = tmp_path / "report.txt"
    subprocess.run(["/app/solve", str(out)], timeout=60, cwd="/tmp")
    for _ in range(300):
        try:
            if out.read_text().strip() == EXPECTED:
                return
        except OSError:
            pass
        time.sleep(0.01)
    raise AssertionError("no report")
'''
WRITES_OUTPUT = ("cat > /app/solve <<'EOF'\n#!/usr/bin/env python3\nimport sys\n"
                 "open(sys.argv[1], 'w').write(str(sum(int(l) for l in open('/app/ledger.txt') if l.strip())) + '\\n')\n"
                 "EOF\nchmod 755 /app/solve\n")
# The program (uid 65534) cannot read /tests, but the tests' process reading its output could.
LINKS_OUTPUT = "printf '#!/bin/sh\\nln -sf /tests/expected.txt \"$1\"\\n' > /app/solve && chmod 755 /app/solve\n"
# A detached process swaps the output between a decoy and a link into the tests, so that a check of
# where the name leads and the open that follows it see different files.
FLIPS_OUTPUT = """cat > /app/solve <<'EOF'
#!/usr/bin/env python3
import os, sys
out = sys.argv[1]
if os.fork() == 0:
    os.setsid()
    for _ in range(3_000_000):
        try:
            os.symlink("/tests/expected.txt", out + ".l")
            os.replace(out + ".l", out)
            with open(out + ".f", "w") as f:
                f.write("0\\n")
            os.replace(out + ".f", out)
        except OSError:
            pass
    os._exit(0)
EOF
chmod 755 /app/solve
"""
LINKS = {"output path": (OUTPUT_TESTS, LINKS_OUTPUT), "a link swapped in after the check": (POLLING_TESTS, FLIPS_OUTPUT)}


@pytest.mark.parametrize("case", list(LINKS))
async def test_a_link_into_the_tests_made_while_they_run_earns_nothing(case, tmp_path, images, test_label) -> None:
    """The managed template: once collected, the tests' process opens a name outside /tests without
    the tests' group (per thread, in the kernel: a link swapped in after its check reads nothing)
    and refuses a name that leads into /tests, which the screen flags."""
    tests, attack = LINKS[case]
    r = await _earns(tmp_path / "attack", attack, images, test_label, tests=tests)
    assert r.reward == 0.0, r.log()
    if case == "output path":
        assert any("a link into /tests/expected.txt" in s for s in forgery_signs(r)), forgery_signs(r)
    good = await validate_task(_task(tmp_path / "honest", WRITES_OUTPUT, tests=tests), images, labels=test_label)
    assert (good.reason, good.oracle_reward, good.nop_reward) == ("ok", 1.0, 0.0), good.logs or good.detail


# A hand-written test.sh (Harbor style): root runs the program as nobody, then reads its output.
READS_AS_ROOT = """#!/bin/bash
mkdir -p /logs/verifier
work=$(mktemp -d) && chmod 777 "$work"
setpriv --reuid=65534 --regid=65534 --clear-groups /app/solve "$work/report.txt" </dev/null >/dev/null 2>&1
if [ "$(cat "$work/report.txt" 2>/dev/null)" = "$(cat /tests/expected.txt)" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
"""
READS_AS_NOBODY = READS_AS_ROOT.replace('$(cat "$work/report.txt"',
                                        '$(setpriv --reuid=65534 --regid=65534 --clear-groups cat "$work/report.txt"')


@pytest.mark.parametrize("test_sh, verdict", [(READS_AS_ROOT, "verifier_forgeable"), (READS_AS_NOBODY, "ok")],
                         ids=["root reads the output", "nobody reads the output"])
async def test_the_tamper_probe_links_what_the_program_is_given_into_the_tests(test_sh, verdict, tmp_path, images,
                                                                             test_label) -> None:
    """Root reading what a program of the agent's wrote follows its links anywhere, and nothing of
    the harness can stop a hand-written test.sh from doing so (``fs.protected_symlinks`` is the
    host's, not a container's, and guards only sticky folders): the probe's hooks link each path
    they are given into the tests, and a test.sh whose root then reads it is not admitted (the
    attack earned 1.0 there and the task was admitted)."""
    r = await validate_task(_task(tmp_path, WRITES_OUTPUT, tests=OUTPUT_TESTS, test_sh=test_sh), images,
                            labels=test_label)
    assert r.reason == verdict, r.logs or r.detail
    if verdict != "ok":
        assert "/app/solve" in r.detail, r.detail


# --- deserialization: the standard library's compilers run nothing of the agent's in the tests' process

def _passes(*names: str) -> str:
    """Python bytes literal text: a pass line on the tests' pipe for each test of test_ledger.py."""
    return "".join(f'pass \\"test_ledger.py::{t}\\"\\n' for t in names)


COMPILERS = {
    # name: (the test that hands the agent's file to the compiler, the honest file, the attack's file)
    "doctest": ("failed, tried = doctest.testfile('/app/USAGE.txt', module_relative=False)\n"
                "    assert tried >= 1 and failed == 0",
                "USAGE.txt", "The sum:\n\n    >>> sum(int(l) for l in open('/app/ledger.txt') if l.strip())\n    $n\n",
                "    >>> import os; os.write(3, b\"{passes}\"); os._exit(0)\n"),
    "timeit": ("assert timeit.timeit(Path('/app/snippet.py').read_text(), number=3) < 5",
               "snippet.py", "sum(int(l) for l in open('/app/ledger.txt') if l.strip())\n",
               "import os; os.write(3, b\"{passes}\"); os._exit(0)\n"),
    "code": ("assert not code.InteractiveInterpreter().runsource(Path('/app/session.py').read_text(), symbol='exec')",
             "session.py", "total = sum(int(l) for l in open('/app/ledger.txt') if l.strip())\n",
             "import os; os.write(3, b\"{passes}\"); os._exit(0)\n"),
    "logging.config": ("logging.config.fileConfig('/app/logging.ini')\n"
                       "    assert logging.getLogger().handlers",
                       "logging.ini", "[loggers]\nkeys=root\n[handlers]\nkeys=h\n[formatters]\nkeys=\n"
                       "[logger_root]\nhandlers=h\n[handler_h]\nclass=StreamHandler\nargs=()\n",
                       "[loggers]\nkeys=root\n[handlers]\nkeys=h\n[formatters]\nkeys=\n[logger_root]\nhandlers=h\n"
                       "[handler_h]\nclass=StreamHandler\n"
                       "args=(__import__('os').write(3, b\"{passes}\"), __import__('os')._exit(0))\n"),
}
COMPILER_TESTS = '''import code
import doctest
import logging.config
import subprocess
import timeit
from pathlib import Path

EXPECTED = (Path(__file__).parent / "expected.txt").read_text().strip()


def test_answer_file():
    assert Path("/app/answer.txt").read_text().strip() == EXPECTED


def test_the_agents_file():
    {check}
'''


def _writes(name: str, text: str, *, expand: bool = False) -> str:
    """solve.sh's lines writing /app/``name`` (``expand``: with the shell's $n in it)."""
    delimiter = "EOF" if expand else "'EOF'"
    return f"cat > /app/{name} <<{delimiter}\n{text}EOF\n"


@pytest.mark.parametrize("compiler", list(COMPILERS))
async def test_the_standard_librarys_compilers_run_no_text_of_the_agents(compiler, tmp_path, images,
                                                                        test_label) -> None:
    """Once collected, the tests' process compiles text (or a tree) only in the import system and
    the modules that build it from no file's text (dataclasses, namedtuple, typing, inspect,
    ast.parse): whoever calls doctest, timeit, code or logging.config, the agent's text is refused."""
    check, name, honest, attack = COMPILERS[compiler]
    tests = COMPILER_TESTS.format(check=check)
    forged = attack.format(passes=_passes("test_answer_file", "test_the_agents_file"))
    r = await _earns(tmp_path / "attack", "echo 0 > /app/answer.txt\n" + _writes(name, forged), images, test_label,
                     tests=tests)
    assert r.reward == 0.0, r.log()
    assert any("compiling text is refused" in s for s in forgery_signs(r)), r.log()
    if compiler == "doctest":  # the agent's examples checked as they should be: in a subprocess, as its uid
        tests = tests.replace(check, "r = subprocess.run(['python3', '-m', 'doctest', '/app/USAGE.txt'], cwd='/tmp', "
                                     "capture_output=True, text=True, timeout=60)\n    assert r.returncode == 0, r.stdout")
        good = await _earns(tmp_path / "honest", SUM + "echo $n > /app/answer.txt\n" + _writes(name, honest, expand=True),
                            images, test_label, tests=tests)
        assert good.reward == 1.0, good.log()


STRAY_PASS = '''import os


def test_that_fails():
    os.write(3, b'pass "not a test"\\n')  # whatever reached the tests' pipe
    assert False
'''


async def test_root_counts_only_passes_of_the_tests_it_was_told_were_collected(tmp_path, images, test_label) -> None:
    """A pass line naming no collected test counted as one pass (1 of 1) before."""
    r = await _earns(tmp_path, "true\n", images, test_label, tests=STRAY_PASS)
    assert r.reward == 0.0 and "reward 0/1" in r.verifier.output, r.log()


# --- environment: root's Python resolves nothing from the working folder

DATA_TESTS = '''from pathlib import Path

EXPECTED = (Path(__file__).parent / "expected.txt").read_text().strip()


def test_answer_file():
    assert Path("/app/answer.txt").read_text().strip() == EXPECTED
'''
ROOT_PYTEST = """#!/bin/bash
mkdir -p /logs/verifier
{cd}python3 -m pytest -q -p no:cacheprovider /tests/test_ledger.py && echo 1 > /logs/verifier/reward.txt \\
    || echo 0 > /logs/verifier/reward.txt
"""
# pytest's own `import fnmatch` finds the agent's first, as root, and it exits 0 before any test.
SHADOW = "echo 0 > /app/answer.txt && printf 'import os\\nos._exit(0)\\n' > /app/fnmatch.py\n"


@pytest.mark.parametrize("cd", ["", "cd /app && "], ids=["from where test.sh starts", "after cd into the results"])
async def test_a_standard_module_shadowed_in_the_results_never_runs_as_root(cd, tmp_path, images, test_label) -> None:
    """test.sh starts in / (it started in the image's working folder, a result path), and root's
    python3 puts no working folder on sys.path (PYTHONSAFEPATH) when test.sh moves into one."""
    test_sh = ROOT_PYTEST.format(cd=cd)
    r = await _earns(tmp_path / "attack", SHADOW, images, test_label, tests=DATA_TESTS, test_sh=test_sh)
    assert r.reward == 0.0, r.log()
    good = await _earns(tmp_path / "honest", SUM + "echo $n > /app/answer.txt\n", images, test_label, tests=DATA_TESTS,
                        test_sh=test_sh)
    assert good.reward == 1.0, good.log()


# --- the tamper probe: reports named as the verdict, for a test.sh that copies the agent's files

COPIES_AFTER = """#!/bin/bash
mkdir -p /logs/verifier{into}
ok=0
[ "$(cat /app/answer.txt 2>/dev/null)" = "$(cat /tests/expected.txt)" ] && ok=1
echo $ok > /logs/verifier/reward.txt
cp /app/reports/* /logs/verifier{into}/ 2>/dev/null   # keep the agent's reports with the verdict
"""
REPORTING = SUM + 'echo $n > /app/answer.txt && mkdir -p /app/reports && echo "{\\"sum\\": $n}" > /app/reports/summary.json\n'


@pytest.mark.parametrize("into, verdict", [("", "verifier_forgeable"), ("/reports", "ok")],
                         ids=["beside the verdict", "in a folder of their own"])
async def test_the_tamper_probe_plants_reward_files_where_the_reference_writes(into, verdict, tmp_path, images,
                                                                            test_label) -> None:
    """Root's copy of the agent's ``reward.txt`` over its own is root's file, read as the verdict
    (the agent's earned 1.0 and the task was admitted): the probe plants ``reward.json`` and
    ``reward.txt`` in each folder the reference wrote to."""
    r = await validate_task(_task(tmp_path, REPORTING, test_sh=COPIES_AFTER.format(into=into)), images,
                            labels=test_label)
    assert r.reason == verdict, r.logs or r.detail
    if verdict != "ok":
        assert "reward file /app/reports/reward.json" in r.detail, r.detail
