"""A blob store that counts its reads, for tests that say how often a payload is fetched."""

from __future__ import annotations

from collections import Counter

from aes_lib.blobstore import BlobStore
from aes_lib.bus import Bus


class CountingStore(BlobStore):
    """The real store behind it, counting reads per key (``get_bytes`` and ``get_file`` each
    open the key once)."""

    def __init__(self, inner: BlobStore) -> None:
        self.inner = inner
        self.url = inner.url
        self.reads: Counter[str] = Counter()

    def _write(self, key, stream, size, sha256):
        self.inner._write(key, stream, size, sha256)

    def _open(self, key):
        self.reads[key] += 1
        return self.inner._open(key)

    def exists(self, key):
        return self.inner.exists(key)

    def delete(self, key):
        self.inner.delete(key)


def bus_over(store: CountingStore) -> type[Bus]:
    """Bus connections that all use ``store`` (one store behind every process, as in a deployment)."""

    class CountingBus(Bus):
        @property
        def blobs(self) -> BlobStore:
            return store

    return CountingBus
