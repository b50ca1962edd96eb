"""``aes contamination index SRC``, ``aes contamination check PATH`` and ``aes contamination status``."""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from aes_cli.errors import CommandError
from aes_cli.output import Progress
from aes_lib.config import Settings
from aes_lib.contamination import DEFAULT_N, NgramIndex, Source, load_heldout, open_index
from aes_ops import contamination


def _index(args: argparse.Namespace) -> int:
    if args.add:
        return _add(args)
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
            where = "blob store " + asyncio.run(contamination.publish(Settings.from_env(), index)) + " (registered for the gate)"
    print(
        f"indexed {len(index.doc_ids)} held-out instructions, {len(index.token_ids)} tokens, "
        f"{len(index.hashes)} {index.n}-grams, {len(data)} bytes in {time.perf_counter() - t0:.2f}s -> {where}"
    )
    return 0


def _add(args: argparse.Namespace) -> int:
    if args.out:
        raise CommandError("--add merges into the registered index; it cannot write a file (--out)")
    heldout = load_heldout(Path(args.source))
    source = Source(args.add, args.repository, args.commit, str(args.source))
    key, index = asyncio.run(contamination.add_benchmark(Settings.from_env(), heldout, source))
    print(f"added {len(heldout)} held-out instructions of {args.add} -> blob store {key} (registered for the gate)")
    for line in contamination.describe(index):
        print(f"  {line}")
    return 0


def _check(args: argparse.Namespace) -> int:
    if args.index:
        index = open_index(Path(args.index).read_bytes())
    else:
        index = asyncio.run(contamination.registered_index(Settings.from_env()))
    candidates, matches = contamination.check(index, [Path(p) for p in args.paths])
    for m in matches:
        print(f"CONTAMINATED {candidates[m.candidate].id}: token {m.position} shares {m.ngram!r} "
              f"with held-out {m.heldout_id}")
    print(f"{len(candidates)} checked against {len(index.doc_ids)} held-out instructions "
          f"({index.n}-grams): {len(matches)} contaminated")
    return 1 if matches else 0


def _status(args: argparse.Namespace) -> int:
    key, index = asyncio.run(contamination.active(Settings.from_env()))
    print(f"contamination check ON: index {key}")
    for line in contamination.describe(index):
        print(f"  {line}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("contamination", help="13-gram overlap with held-out benchmark instructions")
    csub = p.add_subparsers(dest="contamination_command", required=True)
    pi = csub.add_parser("index", help="index held-out instructions (folder of Harbor tasks or JSONL)")
    pi.add_argument("source", help="folder with */instruction.md, or JSONL of {\"id\", \"instruction\"}")
    pi.add_argument("--n", type=int, default=DEFAULT_N, help="n-gram length in tokens (default 13)")
    pi.add_argument("--out", help="write the index to this file instead of registering it in the blob store")
    pi.add_argument("--add", metavar="'NAME VERSION'",
                    help="add SRC as this benchmark to the registered index (hashes only) instead of replacing it")
    pi.add_argument("--repository", default="", help="with --add: the public repository SRC was read from")
    pi.add_argument("--commit", default="", help="with --add: the commit of it that was read")
    pi.set_defaults(func=_index)
    pc = csub.add_parser("check", help="check task folders or instruction files; exit 1 if any is contaminated")
    pc.add_argument("paths", nargs="+", help="task folder(s), folder(s) of tasks, instruction file(s) or JSONL")
    pc.add_argument("--index", help="index file from `index --out` (default: the registered index)")
    pc.set_defaults(func=_check)
    ps = csub.add_parser("status", aliases=["show"], help="the index the gate uses and what it was built from")
    ps.set_defaults(func=_status)
