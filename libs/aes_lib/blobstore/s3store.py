"""``s3://`` backend through the ``minio`` client (MinIO, SeaweedFS, AWS S3)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

from minio import Minio
from minio.error import S3Error

from aes_lib.blobstore.base import CHUNK, BlobStore
from aes_lib.blobstore.errors import BlobAuthError, BlobNotFoundError

AUTH_ERRORS = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"}

PART_SIZE = 8 << 20
"""Multipart upload part size: bounds the memory a large upload uses."""


class S3BlobStore(BlobStore):
    def __init__(self, client: Minio, bucket: str, prefix: str = "") -> None:
        self.client = client
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.url = f"s3://{bucket}/{self.prefix}" if self.prefix else f"s3://{bucket}"
        try:
            if not client.bucket_exists(bucket):
                client.make_bucket(bucket)
        except S3Error as e:
            if e.code in AUTH_ERRORS:
                raise BlobAuthError(f"{self.url}: the server refused the credentials ({e.code})") from e
            raise

    def _name(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _write(self, key: str, stream: BinaryIO, size: int, sha256: str) -> None:
        self.client.put_object(
            self.bucket,
            self._name(key),
            stream,
            size,
            part_size=PART_SIZE,
            num_parallel_uploads=1,
            metadata={"sha256": sha256},
        )

    def _open(self, key: str) -> Iterator[bytes]:
        try:
            resp = self.client.get_object(self.bucket, self._name(key))
        except S3Error as e:
            if e.code == "NoSuchKey":
                raise BlobNotFoundError(f"no blob {key!r} in {self.url}") from None
            raise
        try:
            yield from resp.stream(CHUNK)
        finally:
            resp.close()
            resp.release_conn()

    def exists(self, key: str) -> bool:
        try:
            self.client.stat_object(self.bucket, self._name(key))
        except S3Error as e:
            if e.code in ("NoSuchKey", "NotFound"):
                return False
            raise
        return True

    def delete(self, key: str) -> None:
        self.client.remove_object(self.bucket, self._name(key))
