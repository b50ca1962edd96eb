"""Where the live index lives: its bytes in the blob store, a pointer in a KV bucket.

``aes contamination index SRC`` uploads a new index (content-addressed) and points
the ``index`` key of the ``aes_contamination`` bucket at it; the contamination
gate reads that pointer before each candidate, so a new held-out set takes
effect without a restart.
"""

from __future__ import annotations

import msgspec
from nats.js.errors import KeyNotFoundError
from nats.js.kv import KeyValue

from aes_proto.messages import BlobRef
from aes_proto.records import CONTAMINATION_BUCKET

from aes_lib.blobstore import BlobStore
from aes_lib.contamination.index import NgramIndex

KV_BUCKET = CONTAMINATION_BUCKET
"""Key-value bucket of the gate's configuration."""
KV_KEY = "index"
"""Key whose value is the JSON ``BlobRef`` of the live index."""
BLOB_PREFIX = "contamination/index"


def save_index(blobs: BlobStore, index: NgramIndex) -> BlobRef:
    """Store the index under a key derived from its content."""
    return blobs.put_content(BLOB_PREFIX, index.to_bytes(), suffix=".bin")


def load_index(blobs: BlobStore, ref: BlobRef) -> NgramIndex:
    """Read (checksum verified) and open an index; its arrays stay views of the bytes."""
    return NgramIndex.from_bytes(blobs.get_bytes(ref))


async def register(kv: KeyValue, ref: BlobRef) -> None:
    """Make ``ref`` the index that the gate uses."""
    await kv.put(KV_KEY, msgspec.json.encode(ref))


async def registered(kv: KeyValue) -> BlobRef | None:
    """The live index's ref, or None when no index was ever registered."""
    try:
        entry = await kv.get(KV_KEY)
    except KeyNotFoundError:
        return None
    return msgspec.json.decode(entry.value, type=BlobRef)
