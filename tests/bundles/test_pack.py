"""Packing is deterministic and round-trips; a task directory on disk is checked too."""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import io
from pathlib import Path

import pytest

from aes_lib.bundle import (
    FileTooLargeError,
    BundleLimits,
    LinkEscapeError,
    MissingFileError,
    SpecialFileError,
    Task,
    pack,
    unpack,
)

FIXTURE = Path(__file__).parents[1] / "sandbox" / "tasks" / "echo"


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    dst = tmp_path / "task"
    shutil.copytree(FIXTURE, dst, symlinks=True)
    return dst


def test_pack_is_deterministic_across_copies_mtimes_and_modes(task_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(task_dir, other)
    for path in other.rglob("*"):
        os.utime(path, (1_000_000, 1_000_000))
        if path.is_file() and not os.access(path, os.X_OK):
            path.chmod(0o600)  # group/other bits differ; only the owner's x bit is kept
    a, b = pack(task_dir), pack(other)
    assert a.data == b.data
    assert a.sha256 == b.sha256 == hashlib.sha256(a.data).hexdigest()


def test_pack_normalizes_metadata(task_dir: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(pack(task_dir).data)) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names)
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, 0, "", "")}
    modes = {m.name: m.mode for m in members}
    assert modes["solution/solve.sh"] == 0o755 and modes["instruction.md"] == 0o644


def test_content_change_changes_the_hash(task_dir: Path) -> None:
    before = pack(task_dir).sha256
    (task_dir / "instruction.md").write_text("Something else entirely.\n")
    assert pack(task_dir).sha256 != before


def test_round_trip_keeps_the_hash(task_dir: Path, tmp_path: Path) -> None:
    packed = pack(task_dir)
    task = unpack(packed.data, tmp_path / "out")
    assert pack(task.root).sha256 == packed.sha256
    assert task.instruction == (task_dir / "instruction.md").read_text()


def test_symlink_escaping_on_disk_is_refused(task_dir: Path) -> None:
    (task_dir / "tests" / "secret").symlink_to("/etc/shadow")
    with pytest.raises(LinkEscapeError):
        pack(task_dir)


def test_relative_symlink_out_of_the_task_is_refused(task_dir: Path) -> None:
    (task_dir / "environment" / "up").symlink_to("../../..")
    with pytest.raises(LinkEscapeError):
        Task.load(task_dir)


def test_fifo_on_disk_is_refused(task_dir: Path) -> None:
    os.mkfifo(task_dir / "environment" / "pipe")
    with pytest.raises(SpecialFileError):
        Task.load(task_dir)


def test_oversize_file_on_disk_is_refused(task_dir: Path) -> None:
    (task_dir / "environment" / "blob").write_bytes(b"x" * 4096)
    with pytest.raises(FileTooLargeError):
        Task.load(task_dir, BundleLimits(max_file_bytes=1024))


def test_compose_environment_is_a_valid_bundle(task_dir: Path) -> None:
    (task_dir / "environment" / "Dockerfile").rename(task_dir / "environment" / "docker-compose.yaml")
    (task_dir / "environment" / "docker-compose.yaml").write_text("services:\n  cache: {image: aes-base:latest}\n")
    task = Task.load(task_dir)
    assert task.name == "aes-fixtures/echo" and [s.name for s in task.compose.services] == ["cache"]
    (task_dir / "environment" / "docker-compose.yaml").unlink()
    # An environment/ without a recipe (Harbor's computer-use examples) loads, and is unsupported here.
    assert "environment/ has no Dockerfile or docker-compose file" in Task.load(task_dir).unsupported[0]
    shutil.rmtree(task_dir / "environment")
    with pytest.raises(MissingFileError, match="environment/"):
        Task.load(task_dir)


def test_bytecode_caches_are_not_packed(task_dir: Path) -> None:
    """An installed copy of a task (pip compiles what it installs) packs like its source."""
    before = pack(task_dir)
    cache = task_dir / "tests" / "__pycache__"
    cache.mkdir()
    (cache / "test_x.cpython-311.pyc").write_bytes(b"\xa7\r\r\n\x00")
    after = pack(task_dir)
    assert after.sha256 == before.sha256
    assert not any("__pycache__" in name for name in tarfile.open(fileobj=io.BytesIO(after.data)).getnames())
