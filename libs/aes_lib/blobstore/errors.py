"""One exception type per way a blob operation can fail."""

from __future__ import annotations


class BlobError(Exception):
    """Base of every blob store error."""


class BlobURLError(BlobError):
    """The store URL is malformed or names an unknown scheme."""


class BlobAuthError(BlobError):
    """The object store refused the credentials."""


class BlobKeyError(BlobError):
    """A key that could escape the store or is empty (``..``, absolute, backslash)."""


class BlobNotFoundError(BlobError):
    """No object under the key."""


class BlobCorruptError(BlobError):
    """The stored bytes do not hash to the ``sha256`` the reference promises."""
