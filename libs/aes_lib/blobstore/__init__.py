"""Blob store: one interface, ``file://`` and ``s3://`` backends.

Payloads over a few KB (bundles, logs, trajectories, checkpoints) live here and
travel on the bus as a ``BlobRef`` (key, sha256, size); every read is verified.

    store = open_store(settings.blob_location, settings)
    ref = store.put_content("bundles", archive_bytes, suffix=".tar.gz")
    data = store.get_bytes(ref)      # BlobCorruptError if the bytes changed
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

from aes_lib.blobstore.base import BlobStore, check_key, content_key, sha256_file
from aes_lib.blobstore.errors import (
    BlobAuthError,
    BlobCorruptError,
    BlobError,
    BlobKeyError,
    BlobNotFoundError,
    BlobURLError,
)

if TYPE_CHECKING:
    from aes_lib.config import Settings

__all__ = [
    "BlobStore",
    "BlobError",
    "BlobAuthError",
    "BlobCorruptError",
    "BlobKeyError",
    "BlobNotFoundError",
    "BlobURLError",
    "open_store",
    "check_key",
    "content_key",
    "sha256_file",
]


def open_store(url: str, settings: "Settings | None" = None) -> BlobStore:
    """``file:///abs/path`` or ``s3://bucket[/prefix]?endpoint=host:port&secure=0``.

    S3 credentials come from ``settings.s3_access_key`` / ``s3_secret_key``.
    """
    parts = urlsplit(url)
    if parts.scheme == "file":
        from pathlib import Path

        from aes_lib.blobstore.filestore import FileBlobStore

        if parts.netloc or not parts.path.startswith("/"):
            raise BlobURLError(f"file store URL must be file:///absolute/path, got {url!r}")
        return FileBlobStore(Path(parts.path))
    if parts.scheme == "s3":
        from minio import Minio

        from aes_lib.blobstore.s3store import S3BlobStore

        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        unknown = set(query) - {"endpoint", "secure", "region"}
        if unknown:
            raise BlobURLError(f"unknown s3 URL parameter(s) {sorted(unknown)} in {url!r}")
        if not parts.netloc:
            raise BlobURLError(f"s3 URL needs a bucket: s3://bucket?endpoint=host:port, got {url!r}")
        client = Minio(
            query.get("endpoint", "s3.amazonaws.com"),
            access_key=settings.s3_access_key if settings else None,
            secret_key=settings.s3_secret_key if settings else None,
            secure=query.get("secure", "1") not in ("0", "false"),
            region=query.get("region"),
        )
        return S3BlobStore(client, parts.netloc, parts.path)
    raise BlobURLError(f"unknown blob store scheme {parts.scheme!r} in {url!r}: use file:// or s3://")
