"""One suite for every blob store backend (``file://`` and a real SeaweedFS ``s3://``)."""

from __future__ import annotations

import hashlib
import tracemalloc
from pathlib import Path

import pytest

from aes_proto.messages import BlobRef

from aes_lib.blobstore import (
    BlobAuthError,
    BlobCorruptError,
    BlobKeyError,
    BlobNotFoundError,
    BlobStore,
    BlobURLError,
    open_store,
)
from aes_lib.blobstore.filestore import FileBlobStore
from aes_lib.blobstore.s3store import S3BlobStore

BIG = 100 * (1 << 20)


def corrupt(store: BlobStore, key: str, data: bytes) -> None:
    """Change the stored bytes behind the store's back, as a bad disk or a stray writer would."""
    if isinstance(store, FileBlobStore):
        (store.root / key).write_bytes(data)
    else:
        import io

        assert isinstance(store, S3BlobStore)
        store.client.put_object(store.bucket, store._name(key), io.BytesIO(data), len(data))


def test_bytes_round_trip(blob_store: BlobStore) -> None:
    ref = blob_store.put_bytes("logs/run-1.txt", b"hello")
    assert ref == BlobRef(key="logs/run-1.txt", sha256=hashlib.sha256(b"hello").hexdigest(), size=5)
    assert blob_store.get_bytes(ref) == b"hello"
    assert blob_store.exists("logs/run-1.txt")


def test_empty_object(blob_store: BlobStore) -> None:
    ref = blob_store.put_bytes("empty", b"")
    assert blob_store.get_bytes(ref) == b""


def test_content_addressed_keys(blob_store: BlobStore, tmp_path: Path) -> None:
    data = b"a bundle"
    ref = blob_store.put_content("bundles", data, suffix=".tar.gz")
    assert ref.key == f"bundles/sha256/{hashlib.sha256(data).hexdigest()}.tar.gz"
    src = tmp_path / "bundle.tar.gz"
    src.write_bytes(data)
    assert blob_store.put_content("bundles", src, suffix=".tar.gz") == ref  # same content, same key
    assert blob_store.put_content("bundles", b"another", suffix=".tar.gz").key != ref.key
    assert blob_store.get_bytes(ref) == data


def test_delete(blob_store: BlobStore) -> None:
    ref = blob_store.put_bytes("tmp/x", b"x")
    blob_store.delete("tmp/x")
    assert not blob_store.exists("tmp/x")
    with pytest.raises(BlobNotFoundError, match="tmp/x"):
        blob_store.get_bytes(ref)
    blob_store.delete("tmp/x")  # absent: no error


def test_missing_object(blob_store: BlobStore, tmp_path: Path) -> None:
    ref = BlobRef(key="nope/never", sha256="0" * 64, size=1)
    with pytest.raises(BlobNotFoundError):
        blob_store.get_bytes(ref)
    with pytest.raises(BlobNotFoundError):
        blob_store.get_file(ref, tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("key", ["", "/abs", "a/../b", "..", "a//b", "a\\b", "./a", "a/"])
def test_keys_cannot_escape_the_store(blob_store: BlobStore, key: str) -> None:
    with pytest.raises(BlobKeyError):
        blob_store.put_bytes(key, b"x")


def test_corrupted_object_is_detected_on_read(blob_store: BlobStore, tmp_path: Path) -> None:
    ref = blob_store.put_bytes("bundles/one", b"original bytes")
    corrupt(blob_store, "bundles/one", b"Original bytes")
    with pytest.raises(BlobCorruptError, match="bundles/one"):
        blob_store.get_bytes(ref)
    out = tmp_path / "out"
    with pytest.raises(BlobCorruptError):
        blob_store.get_file(ref, out / "copy")
    assert list(out.iterdir()) == []  # nothing half-verified left behind


def test_truncated_object_is_detected_on_read(blob_store: BlobStore) -> None:
    ref = blob_store.put_bytes("bundles/two", b"0123456789")
    corrupt(blob_store, "bundles/two", b"01234")
    with pytest.raises(BlobCorruptError):
        blob_store.get_bytes(ref)


def _write_big(path: Path) -> str:
    h = hashlib.sha256()
    block = hashlib.sha512(b"seed").digest() * (1 << 14)  # 1 MiB
    with open(path, "wb") as f:
        for i in range(BIG // len(block)):
            chunk = i.to_bytes(8, "big") + block[8:]
            h.update(chunk)
            f.write(chunk)
    return h.hexdigest()


@pytest.mark.slow
def test_100_mb_object_is_streamed(blob_store: BlobStore, tmp_path: Path) -> None:
    src, dst = tmp_path / "big.bin", tmp_path / "back" / "big.bin"
    digest = _write_big(src)
    tracemalloc.start()
    try:
        ref = blob_store.put_file("checkpoints/big.bin", src)
        blob_store.get_file(ref, dst)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert ref.sha256 == digest and ref.size == BIG
    assert dst.stat().st_size == BIG
    assert hashlib.sha256(dst.read_bytes()).hexdigest() == digest
    assert peak < BIG // 3, f"peak Python memory {peak >> 20} MiB: the object was not streamed"


@pytest.mark.parametrize(
    "url", ["ftp://host/x", "file://relative/path", "s3://?endpoint=x:1", "s3://b?endpoint=x:1&colour=red"]
)
def test_bad_store_url(url: str) -> None:
    with pytest.raises(BlobURLError):
        open_store(url)


@pytest.mark.parametrize("which", ["access", "secret"])
def test_s3_refuses_wrong_credentials(s3_server, which: str) -> None:
    import dataclasses

    settings = s3_server.settings()
    wrong = dataclasses.replace(settings, **{f"s3_{which}_key": "wrong-" + which})
    with pytest.raises(BlobAuthError, match="refused the credentials"):
        open_store(wrong.blob_url, wrong)
