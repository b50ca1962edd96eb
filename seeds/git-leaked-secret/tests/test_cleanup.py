"""Checks the leak report and that the key is gone from every ref and from the object store."""

import subprocess
from pathlib import Path

import pytest

REPO = "/app/repo"
SECRET = "sk_live_4f9a2c7e1b8d3a6f5e0c9b7a"
INTRODUCING_COMMIT = "9b7c618c57e869ee4ae41b60712888cdb6e07707"  # "wire payment client" before any rewrite
MAIN_TREE = "0a835add292c4ca6ff0a974c7da25214dc41d272"  # files of main's tip, which hold no key


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", REPO, *args], check=True, capture_output=True, text=True).stdout


def subjects(ref: str) -> list[str]:
    return git("log", "--format=%s", ref).splitlines()


@pytest.fixture(scope="module")
def leak():
    path = Path("/app/leak.txt")
    assert path.exists(), "/app/leak.txt was not written"
    return dict(line.split("=", 1) for line in path.read_text().split())


def test_leak_names_the_key(leak):
    assert leak.get("secret") == SECRET


def test_leak_names_the_introducing_commit(leak):
    assert leak.get("commit") == INTRODUCING_COMMIT


def test_no_reachable_commit_contains_the_key():
    objects = [line.split()[0] for line in git("rev-list", "--objects", "--branches", "--tags").splitlines()]
    assert objects
    blobs = subprocess.run(["git", "-C", REPO, "cat-file", "--batch"], input=("\n".join(objects) + "\n").encode(),
                           check=True, capture_output=True).stdout
    assert SECRET.encode() not in blobs


def test_object_store_purged():
    found = subprocess.run(["git", "-C", REPO, "cat-file", "--batch-all-objects", "--batch"],
                           check=True, capture_output=True).stdout
    assert SECRET.encode() not in found


def test_main_history_and_files_kept():
    assert subjects("main") == [
        "docs: deployment notes", "read payment key from the environment", "add checkout test",
        "wire payment client", "add config loader", "initial app skeleton",
    ]
    assert git("rev-parse", "main^{tree}").strip() == MAIN_TREE


def test_feature_branch_and_tag_rewritten_not_dropped():
    assert subjects("feature/reports")[:2] == ["add monthly report", "add checkout test"]
    assert len(subjects("feature/reports")) == 5
    assert subjects("v0.1")[0] == "wire payment client"
    for ref in ("v0.1", "feature/reports"):
        settings = git("show", f"{ref}:settings.py")
        assert 'PAYMENT_API_KEY = ""' in settings and SECRET not in settings
