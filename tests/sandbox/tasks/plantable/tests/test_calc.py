"""Each check runs the agent's files the way real tasks do: a module in a child process (with
/app on PYTHONPATH), the repository's public tests, a commit in the agent's repository."""

import os
import shutil
import subprocess
import sys


def child(code: str) -> str:
    env = {**os.environ, "PYTHONPATH": "/app"}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.strip()


def test_add():
    assert child("import calc; print(calc.add(2, 3))") == "5"


def test_add_negative():
    assert child("import calc; print(calc.add(-2, -3))") == "-5"


def test_public_tests_pass():
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd="/app",
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:]
    assert "1 passed" in r.stdout


def test_repo_accepts_commits(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree("/app/repo", repo, symlinks=True)
    git = ["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "check"], check=True, timeout=60)
    assert subprocess.run([*git, "rev-list", "--count", "HEAD"], capture_output=True, text=True).stdout.strip() == "2"
    assert child("import calc; print(calc.add(1, 1))") == "2"
