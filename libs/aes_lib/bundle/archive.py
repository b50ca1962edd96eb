"""Deterministic packing and defensive unpacking of task bundles.

``pack`` gives the same bytes for the same tree on any machine: entries sorted,
mtime 0, uid/gid 0 with no names, modes reduced to 0755/0644, gzip header
without name or time. Its sha256 is the environment's id.

``unpack`` streams the archive once, enforcing every limit while it inflates, so
a bomb is stopped after at most ``ratio_floor`` + a chunk of output, and never
writes outside the destination: names are checked, files are opened with
``O_NOFOLLOW | O_EXCL`` below parents that are checked not to be links, links are
checked after extraction, and anything but files, directories and links is refused.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import os
import shutil
import stat
import tarfile
import zlib
from pathlib import Path
from typing import BinaryIO

from aes_lib.bundle.errors import (
    ArchiveTooLargeError,
    BundleError,
    CorruptArchiveError,
    DecompressionBombError,
    FileTooLargeError,
    LinkEscapeError,
    SpecialFileError,
    UnsafePathError,
)
from aes_lib.bundle.task import BundleLimits, Task, walk

_CHUNK = 1 << 16


@dataclasses.dataclass(frozen=True)
class PackedBundle:
    data: bytes
    """The tar.gz archive."""
    sha256: str
    """Hex digest of ``data``: the environment id."""
    instruction: str = ""
    """The packed task's instruction (``Task.instruction``), which its candidate carries."""


BYTECODE_CACHE = "__pycache__"


def pack(root: str | Path, limits: BundleLimits = BundleLimits()) -> PackedBundle:
    """Check the task at ``root`` and archive it deterministically."""
    task = Task.load(root, limits)
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for rel, st in sorted(walk(task.root)):
                if BYTECODE_CACHE in rel.split("/"):
                    continue  # written by whatever Python imported the task's files: not the task
                info = tarfile.TarInfo(rel)
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                path = task.root / rel
                if stat.S_ISDIR(st.st_mode):
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
                elif stat.S_ISLNK(st.st_mode):
                    info.type, info.mode, info.linkname = tarfile.SYMTYPE, 0o777, os.readlink(path)
                    tar.addfile(info)
                else:
                    info.size = st.st_size
                    info.mode = 0o755 if st.st_mode & 0o100 else 0o644
                    with open(path, "rb") as f:
                        tar.addfile(info, f)
    data = buf.getvalue()
    if len(data) > limits.max_archive_bytes:
        raise ArchiveTooLargeError(f"archive is {len(data)} bytes > {limits.max_archive_bytes}")
    return PackedBundle(data=data, sha256=hashlib.sha256(data).hexdigest(), instruction=task.instruction)


class _Compressed(io.RawIOBase):
    """Counts compressed bytes read, refusing more than the archive limit."""

    def __init__(self, src: BinaryIO, limit: int) -> None:
        self.src, self.limit, self.count = src, limit, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        data = self.src.read(len(b))
        self.count += len(data)
        if self.count > self.limit:
            raise ArchiveTooLargeError(f"archive exceeds {self.limit} bytes")
        b[: len(data)] = data
        return len(data)


class _Inflated(io.RawIOBase):
    """Inflates gzip, refusing too many output bytes or too high a ratio as it goes."""

    def __init__(self, compressed: _Compressed, limits: BundleLimits) -> None:
        self.gz = gzip.GzipFile(fileobj=compressed, mode="rb")
        self.compressed, self.limits, self.count = compressed, limits, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        data = self.gz.read(min(len(b), _CHUNK))
        self.count += len(data)
        lim = self.limits
        if self.count > lim.max_total_bytes:
            raise ArchiveTooLargeError(f"archive inflates past {lim.max_total_bytes} bytes")
        if self.count > lim.ratio_floor and self.count > lim.max_ratio * max(self.compressed.count, 1):
            raise DecompressionBombError(
                f"archive inflates {self.count / max(self.compressed.count, 1):.0f}x (> {lim.max_ratio:.0f}x)"
            )
        b[: len(data)] = data
        return len(data)


def _member_path(name: str) -> str:
    """The member's normalized relative path, or UnsafePathError."""
    if not name or "\x00" in name or "\\" in name:
        raise UnsafePathError(f"bad member name {name!r}")
    if name.startswith("/"):
        raise UnsafePathError(f"absolute path {name!r}")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts:
        raise UnsafePathError(f"bad member name {name!r}")
    if ".." in parts:
        raise UnsafePathError(f"path with '..': {name!r}")
    return "/".join(parts)


def _ensure_parent(dest: Path, rel: str) -> Path:
    """Create ``rel``'s parent directories, refusing any component that is a link or a file."""
    cur = dest
    for part in rel.split("/")[:-1]:
        cur = cur / part
        if cur.is_symlink():
            raise LinkEscapeError(f"{rel}: a parent directory is a symlink")
        if not cur.exists():
            cur.mkdir()
        elif not cur.is_dir():
            raise UnsafePathError(f"{rel}: a parent is not a directory")
    return cur / rel.split("/")[-1]


def _write_file(target: Path, src: BinaryIO, size: int, mode: int, limits: BundleLimits, rel: str) -> None:
    if size > limits.max_file_bytes:
        raise FileTooLargeError(f"{rel}: {size} bytes > {limits.max_file_bytes}")
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    except FileExistsError as e:
        raise UnsafePathError(f"{rel}: duplicate member") from e
    with os.fdopen(fd, "wb") as out:
        shutil.copyfileobj(src, out, _CHUNK)


def unpack(archive: bytes | str | Path, dest: str | Path, limits: BundleLimits = BundleLimits()) -> Task:
    """Extract a bundle into ``dest`` (absent or empty) and load it as a Task."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    if any(dest.iterdir()):
        raise ValueError(f"{dest}: destination must be empty")
    dest = dest.resolve()
    if isinstance(archive, bytes):
        src: BinaryIO = io.BytesIO(archive)
    else:
        src = open(archive, "rb")
    try:
        _extract(src, dest, limits)
    finally:
        src.close()
    return Task.load(dest, limits)


def _extract(src: BinaryIO, dest: Path, limits: BundleLimits) -> None:
    stream = _Inflated(_Compressed(src, limits.max_archive_bytes), limits)
    regular: set[str] = set()
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for n, member in enumerate(tar, start=1):
                if n > limits.max_entries:
                    raise ArchiveTooLargeError(f"more than {limits.max_entries} entries")
                _extract_member(tar, member, dest, limits, regular)
    except BundleError:
        raise
    except (tarfile.TarError, gzip.BadGzipFile, zlib.error, EOFError, OSError) as e:
        raise CorruptArchiveError(f"not a readable tar.gz: {e}") from e


def _extract_member(tar: tarfile.TarFile, m: tarfile.TarInfo, dest: Path, limits: BundleLimits, regular: set[str]) -> None:
    rel = _member_path(m.name)
    target = _ensure_parent(dest, rel)
    if m.isdir():
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            raise UnsafePathError(f"{rel}: directory over an existing entry")
        target.mkdir(exist_ok=True)
    elif m.isreg():
        fobj = tar.extractfile(m)
        assert fobj is not None
        _write_file(target, fobj, m.size, 0o755 if m.mode & 0o100 else 0o644, limits, rel)
        regular.add(rel)
    elif m.issym():
        if m.linkname.startswith("/"):
            raise LinkEscapeError(f"{rel}: absolute symlink to {m.linkname}")
        resolved = os.path.normpath(os.path.join(os.path.dirname(rel), m.linkname))
        if resolved == ".." or resolved.startswith("../"):
            raise LinkEscapeError(f"{rel}: symlink to {m.linkname} leaves the bundle")
        if target.exists() or target.is_symlink():
            raise UnsafePathError(f"{rel}: duplicate member")
        os.symlink(m.linkname, target)  # chains through other links are re-checked by Task.load
    elif m.islnk():
        try:
            source = _member_path(m.linkname)
        except UnsafePathError as e:
            raise LinkEscapeError(f"{rel}: hardlink to {m.linkname!r} leaves the bundle") from e
        if source not in regular:
            raise LinkEscapeError(f"{rel}: hardlink to {m.linkname}, not a file earlier in the bundle")
        with open(dest / source, "rb") as f:  # a copy: hardlinks never reach outside
            _write_file(target, f, os.path.getsize(dest / source), 0o644, limits, rel)
    else:
        raise SpecialFileError(f"{rel}: device, fifo or other special member")
