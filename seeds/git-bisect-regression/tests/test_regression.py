"""Checks the bisect answer and the fix committed on top of the original main."""

import importlib.util
import subprocess
from pathlib import Path

import pytest

REPO = "/app/repo"
FIRST_BAD = "3bb8d4e0fae0e6b3c887cbfcd62ed24ed1cc9bb9"  # "perf: simplify slug pattern"
ORIGINAL_MAIN = "c2ead8500c86c572ecea5b2cb2a65bb6d289e888"


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def textutils():
    # Load the module exactly as committed on main's tip, not whatever is in the working tree.
    source = git("show", "main:textutils.py")
    assert source.returncode == 0, source.stderr
    path = Path("/tmp/textutils_main.py")
    path.write_text(source.stdout)
    spec = importlib.util.spec_from_file_location("textutils_main", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    result = subprocess.run(["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                            cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-2000:]
