"""Checks the bisect answer and the fix committed on top of the original main."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = "/app/repo"
FIRST_BAD = "3bb8d4e0fae0e6b3c887cbfcd62ed24ed1cc9bb9"  # "perf: simplify slug pattern"
ORIGINAL_MAIN = "c2ead8500c86c572ecea5b2cb2a65bb6d289e888"


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True)


class Remote:
    """textutils as committed on main's tip, called in a child process (the solver's code never
    runs in the tests' own process): ``remote.slugify("x")`` returns what the child printed."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def __getattr__(self, name: str):
        def call(*args):
            code = (f"import json, sys; sys.path.insert(0, {str(self.folder)!r}); import textutils; "
                    f"print(json.dumps(textutils.{name}(*json.loads(sys.argv[1]))))")
            done = subprocess.run([sys.executable, "-I", "-B", "-c", code, json.dumps(args)],
                                  capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr[-2000:]
            return json.loads(done.stdout)
        return call


@pytest.fixture(scope="module")
def textutils(tmp_path_factory):
    # The module exactly as committed on main's tip, not whatever is in the working tree.
    source = git("show", "main:textutils.py")
    assert source.returncode == 0, source.stderr
    folder = tmp_path_factory.mktemp("main")
    (folder / "textutils.py").write_text(source.stdout)
    return Remote(folder)


def test_first_bad_commit_identified():
    path = Path("/app/first_bad.txt")
    assert path.exists(), "/app/first_bad.txt was not written"
    assert path.read_text().strip() == FIRST_BAD


def test_history_kept_and_fix_committed_on_top():
    assert git("merge-base", "--is-ancestor", ORIGINAL_MAIN, "main").returncode == 0
    assert git("rev-parse", "main").stdout.strip() != ORIGINAL_MAIN
    assert git("symbolic-ref", "--short", "HEAD").stdout.strip() == "main"
    assert git("status", "--porcelain", "--untracked-files=no").stdout == ""


def test_slugify_fixed(textutils):
    assert textutils.slugify("Hello, World!") == "hello-world"
    assert textutils.slugify("  --C++ & Rust--  ") == "c-rust"
    assert textutils.slugify("Crème brûlée") == "creme-brulee"


def test_later_features_still_work(textutils):
    assert textutils.truncate("abcdefgh", 6) == "abc..."
    assert textutils.titlecase("the lord of the rings") == "The Lord of the Rings"
    assert textutils.camel_to_snake("HTTPServerError") == "http_server_error"
    assert git("show", "main:VERSION").stdout.strip() == "0.3.0"


def test_repository_tests_pass():
    # --noconftest: a conftest.py the solver adds must not decide whether its own suite passes.
    result = subprocess.run(["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--noconftest", "tests"],
                            cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-2000:]
