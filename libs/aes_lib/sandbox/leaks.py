"""The leak scan: the task's tests and reference solution must not be in its image.

A task whose image carries its own tests, their expected data or its solution (COPY'd into a
layer, committed to a repository's history, left in a stash) teaches search, not skill: the
solver reads the answer. Each file of ``tests/`` (but the managed ``test.sh``, which is public) and
``solution/`` of at least ``MIN_BYTES`` is looked for, by content, in a container of the image
before anything runs: every regular file of the same size (its sha256) outside the kernel's
file systems, and every object of every git repository found (its git blob id, so history, stashes
and unreachable objects count). Content, not names: a renamed copy is found, a file that merely
shares a name is not. A tests/ file that is also in ``environment/`` (a pristine copy of the program
or an input the solver starts from, which the author put in its hands) is no leak; the test modules
themselves (``test_*.py``, ``*_test.py``, ``conftest.py``) and every solution file always are. What
the reference's work produces is not looked for in git history: a task
may be about mining it (a leaked secret, a bisect), and only its author can say which.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shlex
from pathlib import Path

from aes_lib.bundle import Task
from aes_lib.sandbox.container import Limits, Sandbox
from aes_lib.sandbox.images import ImageCache
from aes_lib.sandbox.trial import TrialFault

MIN_BYTES = 64
"""Smaller files (an expected "42\\n") match too much by chance to name a leak."""
MANAGED = "test.sh"

# Root in a fresh container of the image: argv[1] is JSON {sha256: [size, git blob id, name]}; prints
# one "path\tname" per file found (a git object as "<repo>/.git@<blob id>").
_SCAN = r'''
import hashlib, json, os, subprocess, sys
needles = json.loads(sys.argv[1])
sizes = {v[0] for v in needles.values()}
blobs = {v[1]: v[2] for v in needles.values()}
SKIP = ("/proc", "/sys", "/dev", "/run")
found, repos = [], []
for top, dirs, names in os.walk("/"):
    if top.startswith(SKIP):
        dirs[:] = []
        continue
    if ".git" in dirs:
        repos.append(os.path.join(top, ".git"))
    for name in names:
        path = os.path.join(top, name)
        try:
            if os.path.islink(path) or not os.path.isfile(path) or os.path.getsize(path) not in sizes:
                continue
            with open(path, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            continue
        if digest in needles:
            found.append(f"{path}\t{needles[digest][2]}")
for repo in repos:
    try:
        out = subprocess.run(["git", "--git-dir", repo, "cat-file", "--batch-all-objects", "--batch-check"],
                             capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.SubprocessError):
        continue
    for line in out.splitlines():
        oid = line.split(" ", 1)[0]
        if oid in blobs:
            found.append(f"{repo}@{oid}\t{blobs[oid]}")
print("\n".join(found))
'''


@dataclasses.dataclass(frozen=True)
class Leak:
    where: str
    """A path in the image, or ``<repo>/.git@<blob id>`` for a git object."""
    file: str
    """The task's file found there (``tests/expected.json``)."""


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()) if folder.is_dir() else []


def _test_module(name: str) -> bool:
    return name == "conftest.py" or (name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")))


def _needles(task: Task) -> dict[str, tuple[int, str, str]]:
    """sha256 -> (size, git blob id, name) of each file the image must not hold."""
    given = {hashlib.sha256(p.read_bytes()).hexdigest() for p in _files(task.environment_dir)}
    out: dict[str, tuple[int, str, str]] = {}
    for folder, label in ((task.tests_dir, "tests"), (task.solution_dir, "solution")):
        for p in _files(folder):
            rel = p.relative_to(folder).as_posix()
            if label == "tests" and rel == MANAGED:
                continue
            data = p.read_bytes()
            digest = hashlib.sha256(data).hexdigest()
            if len(data) < MIN_BYTES or (label == "tests" and digest in given and not _test_module(p.name)):
                continue
            blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
            out.setdefault(digest, (len(data), blob, f"{label}/{rel}"))
    return out


async def scan(task: Task, images: ImageCache, image: str, labels: dict[str, str] | None = None) -> list[Leak]:
    """Where in ``image`` the task's tests and solution files are (empty: nowhere)."""
    needles = _needles(task)
    if not needles:
        return []
    async with Sandbox.start(image, Limits.for_task(task.config.environment, images.caps), client=images.client,
                             labels=labels) as sb:
        r = await sb.exec(f"python3 -c {shlex.quote(_SCAN)} {shlex.quote(json.dumps(needles))}", timeout=300, user=0)
    if r.exit_code != 0 or r.timed_out:
        raise TrialFault(f"leak scan did not finish (exit {r.exit_code}): {r.output[-300:]}")
    return [Leak(*line.split("\t", 1)) for line in r.output.splitlines() if "\t" in line]


def detail(leaks: list[Leak]) -> str:
    shown = "; ".join(f"{lk.file} at {lk.where}" for lk in leaks[:5])
    more = f" and {len(leaks) - 5} more" if len(leaks) > 5 else ""
    return (f"the image holds the task's own answer files: {shown}{more}. Keep tests/ and solution/ out of "
            "environment/ and out of every repository's history (the harness copies them in when needed)")
