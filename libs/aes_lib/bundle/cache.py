"""A local, content-addressed cache of unpacked bundles, shared by the processes of one host.

The admission stages and the solver's runner each need a candidate's files; fetching,
hashing and unpacking the archive in every one of them read it from the store about six
times per candidate. Here the first reader puts the archive's bytes in (it checks them
against the digest, unpacks them under the bundle limits, so a hostile archive fails with
the same error as ``unpack``) and every later reader on the host leases the tree.

An entry is ``<root>/<sha256>/`` holding ``task/`` and ``entry.json`` (the tree's own
digest and size). It is written beside the root and renamed into place, so a directory at
its name is always complete, whichever process (or crashed delivery) wrote it. A lease
holds a shared ``flock`` on ``<sha256>.lock`` while the tree is in use; eviction (oldest
use first, while the cache is over ``max_bytes``) takes the lock exclusively without
waiting, so it never removes a tree someone reads. Every lease re-hashes the tree (files
only, no archive, no store) and never uses an entry whose digest differs from the one
recorded when it was unpacked: a reader that changed files, or a damaged disk, costs one
refetch, never a verdict on other bytes.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path

from aes_lib.bundle.archive import unpack
from aes_lib.bundle.errors import CorruptArchiveError
from aes_lib.bundle.task import BundleLimits, Task, walk

ENTRY = "entry.json"
STALE_TMP_S = 86400.0
"""A temporary folder older than this was left by a dead process and is removed: longer than any
stage's budget, as a private copy lives as long as the lease that holds it."""


def tree_digest(root: Path) -> tuple[str, int]:
    """sha256 over every entry's path, kind, executable bit and content (a link: its target),
    and the files' total size."""
    h, total = hashlib.sha256(), 0
    for rel, st in walk(root):
        if stat.S_ISLNK(st.st_mode):
            h.update(f"L {rel}\0{os.readlink(root / rel)}\0".encode())
        elif stat.S_ISDIR(st.st_mode):
            h.update(f"D {rel}\0".encode())
        else:
            h.update(f"F {rel}\0{int(bool(st.st_mode & 0o100))}\0{st.st_size}\0".encode())
            with open(root / rel, "rb") as f:
                while chunk := f.read(1 << 16):
                    h.update(chunk)
            total += st.st_size
    return h.hexdigest(), total


@dataclasses.dataclass
class Lease:
    """A task's tree, usable until ``release``."""

    task: Task
    cached: bool
    """False when the tree is a private copy (the cache's entry was in use and not to be trusted)."""
    _lock: int | None
    _private: Path | None

    def release(self) -> None:
        if self._lock is not None:
            os.close(self._lock)  # drops the shared flock
            self._lock = None
        if self._private is not None:
            shutil.rmtree(self._private, ignore_errors=True)
            self._private = None


class UnpackCache:
    """Unpacked bundles under ``root`` by sha256, at most about ``max_bytes`` of files."""

    def __init__(self, root: Path, max_bytes: int = 1 << 30) -> None:
        self.root = Path(root)
        self.max_bytes = max_bytes
        self.root.mkdir(parents=True, exist_ok=True)

    @classmethod
    def for_settings(cls, settings) -> "UnpackCache":
        """The host's cache: ``<AES_HOME>/cache/bundles``, ``AES_BUNDLE_CACHE_MB`` large."""
        return cls(Path(settings.home) / "cache" / "bundles", settings.bundle_cache_mb << 20)

    def lease(self, digest: str, limits: BundleLimits = BundleLimits()) -> Lease | None:
        """The cached tree of ``digest``, or None: not cached, or its entry cannot be trusted
        (then ``put`` unpacks the bytes again)."""
        _check_digest(digest)
        fd = self._lock(digest, fcntl.LOCK_SH)
        entry = self.root / digest
        try:
            trusted = _trusted(entry)
            if trusted:
                task = Task.load(entry / "task", limits)  # this reader's limits, which may be stricter
                os.utime(entry / ENTRY)  # last use, for eviction
        except BaseException:
            os.close(fd)
            raise
        if not trusted:
            os.close(fd)
            if entry.exists():
                self._drop(digest, keep_trusted=True)
            return None
        return Lease(task, True, fd, None)

    def put(self, digest: str, data: bytes, limits: BundleLimits = BundleLimits()) -> Lease:
        """Check ``data`` against ``digest``, unpack it (raising the bundle's own errors for a
        hostile archive, caching nothing) and lease the tree."""
        _check_digest(digest)
        actual = hashlib.sha256(data).hexdigest()
        if actual != digest:
            raise CorruptArchiveError(f"archive's sha256 {actual[:12]} is not the bundle's {digest[:12]}")
        tmp = Path(tempfile.mkdtemp(dir=self.root, prefix=".tmp-"))
        try:
            task = unpack(data, tmp / "task", limits)
            tree, size = tree_digest(tmp / "task")
            (tmp / ENTRY).write_text(json.dumps({"tree": tree, "bytes": size}))
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        fd = self._lock(digest, fcntl.LOCK_SH)
        try:
            os.rename(tmp, self.root / digest)
        except OSError:
            # Another process put it first, or an untrusted entry is still leased: this
            # reader keeps its own copy, removed on release.
            return Lease(task, False, fd, tmp)
        try:
            self._evict(keep=digest)
            return Lease(Task.load(self.root / digest / "task", limits), True, fd, None)
        except BaseException:
            os.close(fd)
            raise

    def _lock(self, digest: str, mode: int) -> int:
        """An open descriptor of the entry's lock file, locked in ``mode``. Retried when the
        file was replaced while waiting, so every holder locks the same file."""
        path = self.root / f"{digest}.lock"
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, mode)
                if os.fstat(fd).st_ino == os.stat(path).st_ino:
                    return fd
            except FileNotFoundError:
                pass
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)

    def _drop(self, digest: str, keep_trusted: bool = False) -> bool:
        """Remove the entry (and its lock file) unless a lease holds it or, with ``keep_trusted``,
        another process has put a whole one since; whether it is gone."""
        try:
            fd = self._lock(digest, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        try:
            entry = self.root / digest
            if keep_trusted and _trusted(entry):
                return False
            if entry.exists():
                gone = Path(tempfile.mkdtemp(dir=self.root, prefix=".tmp-"))
                os.rename(entry, gone / "entry")  # out of sight at once, then deleted
                shutil.rmtree(gone, ignore_errors=True)
            os.unlink(self.root / f"{digest}.lock")  # a waiter on it sees the inode change and retries
            return True
        finally:
            os.close(fd)

    def _evict(self, keep: str) -> None:
        """Drop the least recently used entries not in use until the cache fits ``max_bytes``,
        and what dead processes left half-written."""
        entries, total, now = [], 0, time.time()
        for p in self.root.iterdir():
            try:
                stale = now - p.stat().st_mtime > STALE_TMP_S
            except FileNotFoundError:  # removed by another process meanwhile
                continue
            if p.name.startswith(".tmp-"):
                if stale:
                    shutil.rmtree(p, ignore_errors=True)
                continue
            if p.suffix == ".lock":
                if stale and not (self.root / p.stem).exists():  # a bundle that never unpacked
                    self._drop(p.stem)
                continue
            if not p.is_dir():
                continue
            try:
                size = json.loads((p / ENTRY).read_text())["bytes"]
                used = (p / ENTRY).stat().st_mtime
            except (OSError, ValueError, KeyError):
                continue
            total += size
            entries.append((used, size, p.name))
        for _, size, digest in sorted(entries):
            if total <= self.max_bytes:
                return
            if digest != keep and self._drop(digest):
                total -= size


def _trusted(entry: Path) -> bool:
    """Whether the entry is whole and its tree still hashes to the digest recorded at unpacking."""
    try:
        recorded = json.loads((entry / ENTRY).read_text())["tree"]
        return tree_digest(entry / "task")[0] == recorded
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _check_digest(digest: str) -> None:
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise ValueError(f"not a sha256 hex digest: {digest!r}")
