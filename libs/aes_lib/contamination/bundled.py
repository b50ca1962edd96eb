"""The held-out index that ships with the package: public terminal-agent benchmarks, hashed.

``aes up`` registers it when no index is registered, so the contamination gate is on
from the first run; an index the user registers (``aes contamination index SRC``)
replaces it and is never replaced back. ``deploy/build_heldout_index.py`` rebuilds
the file from a checkout of its sources (recorded in the file's header).
"""

from __future__ import annotations

from importlib.resources import files

from nats.js.kv import KeyValue

from aes_proto.messages import BlobRef

from aes_lib.blobstore import BlobStore
from aes_lib.contamination.hashed import HashedIndex, Source
from aes_lib.contamination.store import BLOB_PREFIX, register_if_none

FILE_NAME = "terminal-bench.hgram"

EVALUATED = ("Terminal-Bench 2.1", "Terminal-Bench 4.0", "HiL-Bench")
"""The held-out benchmarks the paper evaluates on (Terminal-Bench's two versions, HiL-Bench for
``ask_human``): an index that holds none of a version's instructions cannot flag a copy of it."""


def missing(sources: "list[Source]") -> list[str]:
    """Which of ``EVALUATED`` no source of an index names (a source's name starts with it)."""
    return [b for b in EVALUATED if not any(s.name == b or s.name.startswith(b + " ") for s in sources)]


def bundled_bytes() -> bytes:
    """The shipped index file's bytes."""
    return (files("aes_lib.contamination") / "data" / FILE_NAME).read_bytes()


def bundled_index() -> HashedIndex:
    return HashedIndex.from_bytes(bundled_bytes())


async def register_bundled(kv: KeyValue, blobs: BlobStore) -> tuple[BlobRef, bool]:
    """Store the shipped index and register it unless an index is registered already.
    Its ref, and whether it is now the gate's index because of this call."""
    ref = blobs.put_content(BLOB_PREFIX, bundled_bytes(), suffix=".bin")
    return ref, await register_if_none(kv, ref)
