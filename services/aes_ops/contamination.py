"""``aes contamination`` as functions: the held-out n-gram index registered in the blob store
for the gate, read back, and checked against task folders or instruction files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from aes_lib.blobstore import open_store
from aes_lib.bus import Bus
from aes_lib.config import Settings
from aes_lib.contamination import (KV_BUCKET, HeldoutTask, IndexFormatError, Match, NgramIndex, load_heldout,
                                   load_index, register, registered, save_index)
from aes_ops.connect import with_bus


async def publish(settings: Settings, index: NgramIndex) -> str:
    """Store ``index`` and register it for the contamination gate; its blob key."""
    ref = save_index(open_store(settings.blob_location, settings), index)

    async def go(bus: Bus) -> None:
        await register(await bus.kv(KV_BUCKET), ref)

    await with_bus("aes-cli", go, settings)
    return ref.key


async def registered_index(settings: Settings) -> NgramIndex:
    """The index the gate uses; ``IndexFormatError`` when none is registered."""

    async def go(bus: Bus):
        return await registered(await bus.kv(KV_BUCKET))

    ref = await with_bus("aes-cli", go, settings)
    if ref is None:
        raise IndexFormatError("no index registered: run `aes contamination index SRC` first, or pass --index FILE")
    return load_index(open_store(settings.blob_location, settings), ref)


def candidates(path: Path) -> list[HeldoutTask]:
    """The instructions at ``path``: one file's text (not JSONL), or the tasks ``load_heldout`` reads."""
    if path.is_file() and path.suffix != ".jsonl":
        return [HeldoutTask(str(path), path.read_text(encoding="utf-8", errors="replace"))]
    return load_heldout(path)


def check(index: NgramIndex, paths: Sequence[Path]) -> tuple[list[HeldoutTask], list[Match]]:
    """Every instruction at ``paths`` against ``index``: the instructions and the matches."""
    found = [c for p in paths for c in candidates(p)]
    return found, index.check_many([c.instruction for c in found])
