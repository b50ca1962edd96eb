"""The host's unpack cache: one verified unpack per bundle, shared, bounded, never trusted blindly."""

from __future__ import annotations

import dataclasses
import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from aes_lib.bundle import BundleLimits, CorruptArchiveError, FileTooLargeError, pack
from aes_lib.bundle.cache import UnpackCache

SEEDS = Path(__file__).resolve().parents[2] / "seeds"


def _packed(name: str = "csv-sales-rollup"):
    return pack(SEEDS / name)


def test_a_put_bundle_is_leased_again_without_its_bytes(tmp_path):
    packed = _packed()
    cache = UnpackCache(tmp_path)
    first = cache.put(packed.sha256, packed.data)
    assert first.cached and first.task.instruction == packed.instruction
    first.release()
    # Another reader (a new cache object, as another process has) finds the same tree.
    again = UnpackCache(tmp_path).lease(packed.sha256)
    assert again is not None and again.cached
    assert again.task.root == tmp_path / packed.sha256 / "task"
    assert (again.task.solution_dir / "solve.sh").read_bytes() == (SEEDS / "csv-sales-rollup" / "solution" / "solve.sh").read_bytes()
    again.release()


def test_bytes_that_are_not_the_digest_are_refused(tmp_path):
    packed = _packed()
    with pytest.raises(CorruptArchiveError, match="is not the bundle's"):
        UnpackCache(tmp_path).put("0" * 64, packed.data)
    assert UnpackCache(tmp_path).lease("0" * 64) is None


def test_an_entry_whose_files_changed_is_not_trusted(tmp_path):
    packed = _packed()
    cache = UnpackCache(tmp_path)
    cache.put(packed.sha256, packed.data).release()
    solve = tmp_path / packed.sha256 / "task" / "solution" / "solve.sh"
    solve.write_text("#!/bin/bash\nexit 0\n")  # a reader wrote into the shared tree
    assert cache.lease(packed.sha256) is None
    assert not (tmp_path / packed.sha256).exists()  # dropped: the next reader puts the bundle again
    fresh = cache.put(packed.sha256, packed.data)
    assert (fresh.task.solution_dir / "solve.sh").read_bytes() != b"#!/bin/bash\nexit 0\n"
    fresh.release()


def test_a_changed_entry_still_leased_elsewhere_gives_a_private_copy(tmp_path):
    packed = _packed()
    cache = UnpackCache(tmp_path)
    held = cache.put(packed.sha256, packed.data)
    (held.task.root / "instruction.md").write_text("something else\n")
    assert cache.lease(packed.sha256) is None  # not trusted, and not removable while held
    mine = cache.put(packed.sha256, packed.data)
    assert not mine.cached and mine.task.instruction == packed.instruction
    private = mine.task.root
    mine.release()
    assert not private.exists()
    held.release()


def test_a_reader_with_stricter_limits_gets_its_own_error(tmp_path):
    packed = _packed()
    cache = UnpackCache(tmp_path)
    cache.put(packed.sha256, packed.data).release()
    with pytest.raises(FileTooLargeError):
        cache.lease(packed.sha256, dataclasses.replace(BundleLimits(), max_file_bytes=16))


def test_the_oldest_unused_entries_go_when_the_cache_is_full(tmp_path):
    a, b, c = _packed("csv-sales-rollup"), _packed("access-log-report"), _packed("fix-permissions")
    size = sum(f.stat().st_size for f in (SEEDS / "csv-sales-rollup").rglob("*") if f.is_file())
    cache = UnpackCache(tmp_path, max_bytes=size + 1)  # about one task
    held = cache.put(a.sha256, a.data)  # in use: never evicted
    cache.put(b.sha256, b.data).release()
    assert (tmp_path / a.sha256).exists() and (tmp_path / b.sha256).exists()
    held.release()
    cache.put(c.sha256, c.data).release()
    kept = {p.name for p in tmp_path.iterdir() if p.is_dir()}
    assert kept == {c.sha256}


def test_processes_putting_one_bundle_at_once_all_get_a_whole_tree(tmp_path):
    packed = _packed()
    archive = tmp_path / "b.tar.gz"
    archive.write_bytes(packed.data)
    script = (
        "import sys; from pathlib import Path\n"
        "from aes_lib.bundle.cache import UnpackCache\n"
        "c = UnpackCache(Path(sys.argv[1]))\n"
        "data = Path(sys.argv[2]).read_bytes()\n"
        "lease = c.lease(sys.argv[3]) or c.put(sys.argv[3], data)\n"
        "print(lease.task.instruction == Path(lease.task.root, 'instruction.md').read_text())\n"
        "lease.release()\n")
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "cache"), str(archive), packed.sha256],
                              stdout=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert outs == ["True"] * 4 and all(p.returncode == 0 for p in procs)
    entries = [p for p in (tmp_path / "cache").iterdir() if p.is_dir()]
    assert [e.name for e in entries] == [packed.sha256]  # one entry, no half-written leftovers
    assert hashlib.sha256(archive.read_bytes()).hexdigest() == packed.sha256
