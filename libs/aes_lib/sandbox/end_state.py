"""A trial's end state as stored for re-grading: the engine's own archives of the agent's result
paths, before the trust boundary filtered them (``verifier.rebuild``), so that a later verifier
applies its own rules to what the agent left, not to what an older one let through.

Stored as one gzip'd tar: ``roots.json`` (each result path and whether it existed, and whether
the engine's archives carry owner numbers: Podman's do not) and ``<i>.tar``, the engine's archive
of the i-th path. The bytes are the agent's: they are only ever
read back through ``verifier.rebuild``, never extracted as they are.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import tempfile
from typing import IO

MAX_END_STATE_BYTES = 1 << 30
"""Most bytes (compressed) one trial's end state may take in the store: as many as may cross
(``verifier.MAX_RESULT_BYTES``), so every attempt whose results crossed can be re-graded. A
smaller cap let a policy dodge ``aes regrade`` by padding its results."""
_SPOOL = 32 << 20


class EndStateError(ValueError):
    """Stored bytes that are not an end state this module wrote."""


class _Bounded(io.RawIOBase):
    """A write-only buffer that refuses to grow past ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self.buf, self.limit = io.BytesIO(), limit

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        if self.buf.tell() + len(b) > self.limit:
            raise OverflowError
        return self.buf.write(b)


def pack(archives: list[tuple[str, IO[bytes] | None]], limit: int = MAX_END_STATE_BYTES, *,
         owners: bool = True) -> bytes | None:
    """The end state of ``archives`` (``verifier.collect``'s: each left at its start, as found;
    ``owners``: ``Sandbox.archive_owners`` of the engine that made them); None when it would take more than ``limit`` bytes. Compression stops at the limit, so a
    gigabyte of results costs no more than the limit's worth of work."""
    out = _Bounded(limit)
    try:
        with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=6, mtime=0) as gz, \
                tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            roots = [{"path": root, "present": raw is not None} for root, raw in archives]
            _add(tar, "roots.json", io.BytesIO(json.dumps({"owners": owners, "roots": roots}).encode()))
            for i, (_, raw) in enumerate(archives):
                if raw is not None:
                    _add(tar, f"{i}.tar", raw)
                    raw.seek(0)
    except OverflowError:
        for _, raw in archives:
            if raw is not None:
                raw.seek(0)
        return None
    return out.buf.getvalue()


def unpack(data: bytes) -> tuple[list[tuple[str, IO[bytes] | None]], bool]:
    """``pack``'s input back: ``(result path, its archive or None)`` ready for ``verifier.rebuild``,
    and whether the archives carry owners."""
    out: list[tuple[str, IO[bytes] | None]] = []
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            meta = json.loads(_read(tar, "roots.json"))
            if not isinstance(meta, dict) or not isinstance(meta.get("roots"), list):
                raise EndStateError("roots.json is not an object with a list of roots")
            for i, root in enumerate(meta["roots"]):
                if not isinstance(root, dict) or not isinstance(root.get("path"), str):
                    raise EndStateError(f"roots.json entry {i} is not a result path: {root!r}")
                spool = None
                if root.get("present"):
                    spool = tempfile.SpooledTemporaryFile(_SPOOL)
                    spool.write(_read(tar, f"{i}.tar"))
                    spool.seek(0)
                out.append((root["path"], spool))
    except (tarfile.TarError, EOFError, OSError, ValueError, KeyError) as e:
        for _, f in out:
            if f is not None:
                f.close()
        raise EndStateError(f"not a stored end state: {e}") from e
    return out, meta.get("owners") is not False


def _add(tar: tarfile.TarFile, name: str, f: IO[bytes]) -> None:
    f.seek(0, io.SEEK_END)
    info = tarfile.TarInfo(name)
    info.size = f.tell()
    f.seek(0)
    tar.addfile(info, f)


def _read(tar: tarfile.TarFile, name: str) -> bytes:
    f = tar.extractfile(name)
    if f is None:
        raise EndStateError(f"{name} is not a file")
    return f.read()
