"""``aes contamination`` as functions: the held-out n-gram index registered in the blob store
for the gate, read back, and checked against task folders or instruction files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from aes_lib.blobstore import open_store
from aes_lib.bus import Bus
from aes_lib.config import Settings
from aes_lib.contamination import (KV_BUCKET, AnyIndex, HashedIndex, HeldoutTask, IndexFormatError, Match,
                                   NgramIndex, Source, load_heldout, load_index, register, registered,
                                   save_index)
from aes_lib.contamination.bundled import missing, register_bundled
from aes_ops.connect import with_bus


async def publish(settings: Settings, index: AnyIndex) -> str:
    """Store ``index`` and register it for the contamination gate; its blob key."""
    ref = save_index(open_store(settings.blob_location, settings), index)

    async def go(bus: Bus) -> None:
        await register(await bus.kv(KV_BUCKET), ref)

    await with_bus("aes-cli", go, settings)
    return ref.key


async def registered_index(settings: Settings) -> AnyIndex:
    """The index the gate uses; ``IndexFormatError`` when none is registered."""
    return (await active(settings))[1]


async def active(settings: Settings) -> tuple[str, AnyIndex]:
    """The gate's index and its blob key; ``IndexFormatError`` when none is registered."""

    async def go(bus: Bus):
        return await registered(await bus.kv(KV_BUCKET))

    ref = await with_bus("aes-cli", go, settings)
    if ref is None:
        raise IndexFormatError("no index registered: `aes up` registers the bundled Terminal-Bench index; "
                               "or run `aes contamination index SRC`, or pass --index FILE")
    return ref.key, load_index(open_store(settings.blob_location, settings), ref)


async def register_default(bus: Bus) -> bool:
    """Register the bundled index unless an index is registered; True if it was."""
    _, now = await register_bundled(await bus.kv(KV_BUCKET), bus.blobs)
    return now


ADD = "aes contamination index DIR --add 'NAME VERSION' [--repository OWNER/NAME --commit SHA]"
"""How to add a benchmark to the registered index (named by ``describe``)."""


def describe(index: AnyIndex) -> list[str]:
    """What ``index`` covers, a line per benchmark and version; which evaluated benchmarks it
    does not, and the command that adds them; then its size."""
    size = f"{len(index.doc_ids)} held-out instructions, {len(index.hashes)} {index.n}-grams"
    if not isinstance(index, HashedIndex):
        return ["covers: the user's own held-out set (`aes contamination index SRC`), no named benchmark", size]
    lines = [f"covers: {s.name}: {s.repository or 'local'} @ {s.commit or 'unrecorded'} ({s.path})" for s in index.sources]
    if gaps := missing(index.sources):
        lines.append(f"not covered: {', '.join(gaps)} (evaluated on in the paper); add each with: {ADD}")
    return [*lines, f"{size} (hashes only)"]


async def add_benchmark(settings: Settings, tasks: Sequence[HeldoutTask], source: Source) -> tuple[str, HashedIndex]:
    """Merge ``tasks`` (named under ``source.name``) into the registered hashed index and register
    the result: the new blob key and index. A user's text index has no benchmark to add to."""
    _, now = await active(settings)
    if not isinstance(now, HashedIndex):
        raise IndexFormatError("the registered index is a text index of your own held-out set: rebuild it "
                               "from all its sources with `aes contamination index SRC` instead of --add")
    added = now.merged(HashedIndex.build([HeldoutTask(f"{source.name}/{t.id}", t.instruction) for t in tasks],
                                         [source], n=now.n))
    return await publish(settings, added), added


def candidates(path: Path) -> list[HeldoutTask]:
    """The instructions at ``path``: one file's text (not JSONL), or the tasks ``load_heldout`` reads."""
    if path.is_file() and path.suffix != ".jsonl":
        return [HeldoutTask(str(path), path.read_text(encoding="utf-8", errors="replace"))]
    return load_heldout(path)


def check(index: NgramIndex, paths: Sequence[Path]) -> tuple[list[HeldoutTask], list[Match]]:
    """Every instruction at ``paths`` against ``index``: the instructions and the matches."""
    found = [c for p in paths for c in candidates(p)]
    return found, index.check_many([c.instruction for c in found])
