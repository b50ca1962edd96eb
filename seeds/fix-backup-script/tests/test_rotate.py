"""Runs /app/bin/rotate-backups.sh in scratch directories whose paths contain spaces."""

import os
import subprocess
import tarfile
from pathlib import Path

import pytest

SCRIPT = "/app/bin/rotate-backups.sh"


def run(*args: str, stamp: str = "20240601120000") -> subprocess.CompletedProcess:
    env = {**os.environ, "BACKUP_STAMP": stamp}
    return subprocess.run(["bash", SCRIPT, *args], capture_output=True, text=True, env=env, timeout=60)


@pytest.fixture
def dirs(tmp_path):
    src = tmp_path / "home dir" / "my docs"
    (src / "sub folder").mkdir(parents=True)
    (src / "notes.txt").write_text("remember the milk\n")
    (src / "sub folder" / "plan b.txt").write_text("plan\n")
    dest = tmp_path / "backup area"
    dest.mkdir()
    return src, dest


def test_archive_created_with_spaces_in_paths(dirs):
    src, dest = dirs
    result = run(str(src), str(dest), "3")
    assert result.returncode == 0, result.stderr
    archive = dest / "my docs-20240601120000.tar.gz"
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    assert {"my docs/notes.txt", "my docs/sub folder/plan b.txt"} <= names


def test_keeps_exactly_keep_newest_by_stamp(dirs):
    src, dest = dirs
    old = ["20240101000000", "20240201000000", "20240301000000", "20240401000000"]
    for i, stamp in enumerate(old):
        path = dest / f"my docs-{stamp}.tar.gz"
        path.write_bytes(b"old")
        # Older stamps get newer modification times, so mtime order is the opposite of stamp order.
        os.utime(path, (2_000_000_000 - i * 1000, 2_000_000_000 - i * 1000))
    result = run(str(src), str(dest), "3")
    assert result.returncode == 0, result.stderr
    left = sorted(p.name for p in dest.glob("my docs-*.tar.gz"))
    assert left == ["my docs-20240301000000.tar.gz", "my docs-20240401000000.tar.gz",
                    "my docs-20240601120000.tar.gz"]


def test_other_sources_untouched(dirs):
    src, dest = dirs
    others = [dest / f"photos-2023010{i}000000.tar.gz" for i in range(1, 6)]
    for path in others:
        path.write_bytes(b"keep me")
    (dest / "README").write_text("do not delete\n")
    for stamp in ("20240601120000", "20240602120000"):
        assert run(str(src), str(dest), "1", stamp=stamp).returncode == 0
    assert all(p.exists() for p in others) and (dest / "README").exists()
    assert [p.name for p in dest.glob("my docs-*")] == ["my docs-20240602120000.tar.gz"]


def test_missing_source_fails_without_archive(tmp_path):
    dest = tmp_path / "out"
    result = run(str(tmp_path / "nope"), str(dest), "2")
    assert result.returncode == 1
    assert not dest.exists() or not list(dest.glob("*.tar.gz"))


@pytest.mark.parametrize("args", [(), ("a", "b"), ("{src}", "{dest}", "zero"), ("{src}", "{dest}", "0")])
def test_usage_errors_exit_2(dirs, args):
    src, dest = dirs
    result = run(*(a.format(src=src, dest=dest) for a in args))
    assert result.returncode == 2
    assert "usage" in result.stderr.lower()
    assert not list(dest.glob("*.tar.gz"))
