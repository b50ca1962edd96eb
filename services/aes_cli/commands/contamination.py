"""``aes contamination index SRC`` and ``aes contamination check PATH``."""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from aes_cli.output import Progress
from aes_lib.blobstore import open_store
from aes_lib.config import Settings
from aes_lib.contamination import (
    DEFAULT_N,
    KV_BUCKET,
    HeldoutTask,
    IndexFormatError,
    NgramIndex,
    load_heldout,
    load_index,
    register as register_index,
    registered,
    save_index,
)


async def _kv(settings: Settings):
    from aes_lib.bus import Bus

    bus = await Bus.connect(settings, name="aes-cli")
    return bus, await bus.kv(KV_BUCKET)


async def _publish(settings: Settings, index: NgramIndex) -> str:
    ref = save_index(open_store(settings.blob_location, settings), index)
    bus, kv = await _kv(settings)
    async with bus:
        await register_index(kv, ref)
    return ref.key


async def _registered_index(settings: Settings) -> NgramIndex:
    bus, kv = await _kv(settings)
    async with bus:
        ref = await registered(kv)
    if ref is None:
        raise IndexFormatError("no index registered: run `aes contamination index SRC` first, or pass --index FILE")
    return load_index(open_store(settings.blob_location, settings), ref)


def _index(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    with Progress("index") as progress:
        progress.step(f"reading {args.source}", advance=0)
        heldout = load_heldout(Path(args.source))
        index = NgramIndex.build(progress.track(heldout, "tokenized"), n=args.n)
        data = index.to_bytes()
        where = args.out
        if args.out:
            Path(args.out).write_bytes(data)
        else:
            progress.step("registering in the blob store", advance=0)
            where = "blob store " + asyncio.run(_publish(Settings.from_env(), index)) + " (registered for the gate)"
    print(
        f"indexed {len(index.doc_ids)} held-out instructions, {len(index.token_ids)} tokens, "
        f"{len(index.hashes)} {index.n}-grams, {len(data)} bytes in {time.perf_counter() - t0:.2f}s -> {where}"
    )
    return 0


def _candidates(path: Path) -> list[HeldoutTask]:
    if path.is_file() and path.suffix != ".jsonl":
        return [HeldoutTask(str(path), path.read_text(encoding="utf-8", errors="replace"))]
    return load_heldout(path)


def _check(args: argparse.Namespace) -> int:
    if args.index:
        index = NgramIndex.from_bytes(Path(args.index).read_bytes())
    else:
        index = asyncio.run(_registered_index(Settings.from_env()))
    candidates = [c for p in args.paths for c in _candidates(Path(p))]
    matches = index.check_many([c.instruction for c in candidates])
    for m in matches:
        print(f"CONTAMINATED {candidates[m.candidate].id}: token {m.position} shares {m.ngram!r} "
              f"with held-out {m.heldout_id}")
    print(f"{len(candidates)} checked against {len(index.doc_ids)} held-out instructions "
          f"({index.n}-grams): {len(matches)} contaminated")
    return 1 if matches else 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("contamination", help="13-gram overlap with held-out benchmark instructions")
    csub = p.add_subparsers(dest="contamination_command", required=True)
    pi = csub.add_parser("index", help="index held-out instructions (folder of Harbor tasks or JSONL)")
    pi.add_argument("source", help="folder with */instruction.md, or JSONL of {\"id\", \"instruction\"}")
    pi.add_argument("--n", type=int, default=DEFAULT_N, help="n-gram length in tokens (default 13)")
    pi.add_argument("--out", help="write the index to this file instead of registering it in the blob store")
    pi.set_defaults(func=_index)
    pc = csub.add_parser("check", help="check task folders or instruction files; exit 1 if any is contaminated")
    pc.add_argument("paths", nargs="+", help="task folder(s), folder(s) of tasks, instruction file(s) or JSONL")
    pc.add_argument("--index", help="index file from `index --out` (default: the registered index)")
    pc.set_defaults(func=_check)
