"""The ``BlobStore`` interface shared by every backend.

Backends implement four primitives (write a stream, open a stream, exists,
delete); hashing, content addressing and checksum verification live here once.
Every method is synchronous: call it through ``asyncio.to_thread`` from a
handler when the object is large.
"""

from __future__ import annotations

import abc
import hashlib
import io
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from aes_proto.messages import BlobRef

from aes_lib.blobstore.errors import BlobCorruptError, BlobKeyError

CHUNK = 1 << 20
"""Bytes read or written at a time by streaming operations."""


def check_key(key: str) -> str:
    """Return ``key`` if it stays inside the store, else raise ``BlobKeyError``."""
    parts = key.split("/")
    if not key or key.startswith("/") or "\\" in key or "\x00" in key or any(p in ("", ".", "..") for p in parts):
        raise BlobKeyError(f"invalid blob key {key!r}: use non-empty '/'-separated parts without '.' or '..'")
    return key


def sha256_file(path: Path) -> tuple[str, int]:
    """Hex digest and size of a file, read in chunks."""
    h, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def content_key(prefix: str, digest: str, suffix: str = "") -> str:
    """Content-addressed key, e.g. ``bundles/sha256/<hex>.tar.gz``."""
    return check_key(f"{prefix.strip('/')}/sha256/{digest}{suffix}")


class BlobStore(abc.ABC):
    """Keys are '/'-separated paths; every read is checked against a ``BlobRef``."""

    url: str

    # -- backend primitives -------------------------------------------------
    @abc.abstractmethod
    def _write(self, key: str, stream: BinaryIO, size: int, sha256: str) -> None:
        """Store exactly ``size`` bytes read from ``stream`` under ``key``."""

    @abc.abstractmethod
    def _open(self, key: str) -> Iterator[bytes]:
        """Yield the stored bytes in chunks; raise ``BlobNotFoundError`` if absent."""

    @abc.abstractmethod
    def exists(self, key: str) -> bool:
        """Whether an object is stored under ``key``."""

    @abc.abstractmethod
    def delete(self, key: str) -> None:
        """Remove ``key``; no error if it is absent."""

    # -- public API -----------------------------------------------------------
    def put_bytes(self, key: str, data: bytes) -> BlobRef:
        digest = hashlib.sha256(data).hexdigest()
        self._write(check_key(key), io.BytesIO(data), len(data), digest)
        return BlobRef(key=key, sha256=digest, size=len(data))

    def put_file(self, key: str, path: str | os.PathLike[str]) -> BlobRef:
        """Stream a file into the store (hashed first, then uploaded: never held in memory)."""
        path = Path(path)
        digest, size = sha256_file(path)
        with open(path, "rb") as f:
            self._write(check_key(key), f, size, digest)
        return BlobRef(key=key, sha256=digest, size=size)

    def put_content(self, prefix: str, data: bytes | os.PathLike[str], suffix: str = "") -> BlobRef:
        """Store under a key derived from the sha256 of the content; a no-op if already there."""
        if isinstance(data, bytes):
            digest, size = hashlib.sha256(data).hexdigest(), len(data)
        else:
            digest, size = sha256_file(Path(data))
        key = content_key(prefix, digest, suffix)
        if not self.exists(key):
            if isinstance(data, bytes):
                self._write(key, io.BytesIO(data), size, digest)
            else:
                with open(data, "rb") as f:
                    self._write(key, f, size, digest)
        return BlobRef(key=key, sha256=digest, size=size)

    def get_bytes(self, ref: BlobRef) -> bytes:
        """The object's bytes, after checking them against ``ref.sha256``."""
        h, buf = hashlib.sha256(), bytearray()
        for chunk in self._open(check_key(ref.key)):
            h.update(chunk)
            buf += chunk
        _verify(ref, h.hexdigest(), len(buf))
        return bytes(buf)

    def get_file(self, ref: BlobRef, path: str | os.PathLike[str]) -> Path:
        """Stream the object to ``path``; the file appears only if the checksum matches."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        h, size = hashlib.sha256(), 0
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(fd, "wb") as f:
                for chunk in self._open(check_key(ref.key)):
                    h.update(chunk)
                    size += len(chunk)
                    f.write(chunk)
            _verify(ref, h.hexdigest(), size)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path


def _verify(ref: BlobRef, digest: str, size: int) -> None:
    if digest != ref.sha256 or size != ref.size:
        raise BlobCorruptError(
            f"blob {ref.key!r} is corrupt: expected sha256 {ref.sha256} ({ref.size} bytes), "
            f"read {digest} ({size} bytes)"
        )
