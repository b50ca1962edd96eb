"""``aes dlq list|show|replay|purge``: the messages services gave up on (stream ``AES_DLQ``).

A letter's id is its sequence in ``AES_DLQ``, as ``list`` prints it.
"""

from __future__ import annotations

import argparse
import asyncio
import pprint
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable

import msgspec

from aes_cli.errors import CommandError
from aes_cli.output import print_json, table
from aes_lib.bus import Bus, DeadLetterError, History, StoredLetter
from aes_lib.bus.deadletters import get_letter, original_bytes, purge, purge_all, read_letters, replay
from aes_ops.connect import with_bus
from aes_ops.rounds import decode_any

ERROR_WIDTH = 60
"""Characters of the error shown per letter by ``list``."""
PREVIEW_BYTES = 64
"""Bytes shown in hex of a message that is not even msgpack."""


def _main(go: Callable[[Bus], Awaitable[int]]) -> int:
    """Run ``go`` on a connection to the stack."""
    return asyncio.run(with_bus("aes-dlq", go))


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))


def _one_line(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _size(s: StoredLetter) -> int:
    return s.letter.payload.size if s.letter.payload else len(s.letter.data)


def _skipped_note(letters: History) -> list[str]:
    if not letters.skipped:
        return []
    return [f"{letters.skipped} undecodable messages skipped on {letters.subject} (aes dlq purge --all removes them)"]


def _counts(c: Counter[str]) -> str:
    return ", ".join(f"{k} {n}" for k, n in c.most_common())


def _table(letters: History[StoredLetter]) -> list[str]:
    if not letters:
        return ["no dead letters", *_skipped_note(letters)]
    rows = table(("ID", "TIME (UTC)", "CONSUMER", "FAULT", "EPISODE", "SUBJECT", "ERROR"), [
        (str(s.id), _when(s.letter.created_at), s.letter.consumer, s.letter.fault, s.letter.episode_id or "-",
         s.letter.subject, _one_line(s.letter.error, ERROR_WIDTH)) for s in letters])
    return [*rows.splitlines(),
            f"{len(letters)} dead letters; by consumer: {_counts(Counter(s.letter.consumer for s in letters))}; "
            f"by fault: {_counts(Counter(s.letter.fault for s in letters))}", *_skipped_note(letters)]


def _as_json(letters: History[StoredLetter]) -> dict:
    rows = [{"id": s.id, "time": s.letter.created_at, "consumer": s.letter.consumer, "fault": s.letter.fault,
             "episode_id": s.letter.episode_id, "subject": s.letter.subject, "stream": s.letter.stream,
             "source_sequence": s.letter.source_sequence, "deliveries": s.letter.deliveries,
             "error": s.letter.error, "size": _size(s),
             "payload_key": s.letter.payload.key if s.letter.payload else None} for s in letters]
    return {"letters": rows, "skipped": letters.skipped,
            "by_consumer": Counter(s.letter.consumer for s in letters),
            "by_fault": Counter(s.letter.fault for s in letters)}


def _list(args: argparse.Namespace) -> int:
    async def go(bus: Bus) -> int:
        letters = await read_letters(bus, args.service)
        if args.json:
            print_json(_as_json(letters))
        else:
            print("\n".join(_table(letters)))
        return 0
    return _main(go)


def decoded_view(data: bytes) -> str:
    """The message as its wire type when it decodes as one; else its generic msgpack
    content; else a hex preview."""
    if (m := decode_any(data)) is not None:
        return f"{type(m).__name__} " + msgspec.json.format(msgspec.json.encode(m), indent=2).decode()
    try:
        raw = msgspec.msgpack.decode(data)
    except msgspec.DecodeError:
        tail = " ..." if len(data) > PREVIEW_BYTES else ""
        return f"{len(data)} bytes, not msgpack: {data[:PREVIEW_BYTES].hex(' ')}{tail}"
    return f"not a known message; msgpack content:\n{pprint.pformat(raw)}"


async def _message(bus: Bus, s: StoredLetter) -> str:
    try:
        return decoded_view(await original_bytes(bus, s.letter))
    except DeadLetterError as e:
        return f"unavailable: {e}"


def _show(args: argparse.Namespace) -> int:
    async def go(bus: Bus) -> int:
        s = await get_letter(bus, args.id)
        d = s.letter
        where = f"{_size(s)} bytes " + (f"in the blob store at {d.payload.key}" if d.payload else "on the bus")
        fields = [("id", s.id), ("time (UTC)", _when(d.created_at)), ("consumer", d.consumer), ("fault", d.fault),
                  ("deliveries", d.deliveries), ("episode", d.episode_id or "-"), ("subject", d.subject),
                  ("stream", f"{d.stream} sequence {d.source_sequence or 'unknown'}"), ("error", d.error),
                  ("bytes", where), *((f"header {k}", v) for k, v in sorted(d.headers.items()))]
        print("\n".join(f"{k:<22} {v}" for k, v in fields))
        print(f"message: {await _message(bus, s)}")
        return 0
    return _main(go)


def _chosen(args: argparse.Namespace) -> str | None:
    """Why the ids/--all/--service combination is wrong, if it is."""
    if bool(args.ids) == args.all:
        return "give letter ids or --all"
    if args.service and not args.all:
        return "--service goes with --all"
    return None


def _replay(args: argparse.Namespace) -> int:
    async def go(bus: Bus) -> int:
        letters = await read_letters(bus, args.service) if args.all else [await get_letter(bus, i) for i in args.ids]
        failed = 0
        for s in letters:
            try:
                ack = await replay(bus, s)
            except DeadLetterError as e:
                print(f"aes dlq: {s.id}: {e}", file=sys.stderr)
                failed += 1
                continue
            print(f"replayed {s.id}: {s.letter.subject} ({ack.stream} sequence {ack.seq}"
                  f"{', already replayed' if ack.duplicate else ''}) for {s.letter.consumer}, episode {s.letter.episode_id or '-'}")
        if not letters:
            print("no dead letters to replay")
        return 1 if failed else 0
    return _main(go)


def _purge(args: argparse.Namespace) -> int:
    async def go(bus: Bus) -> int:
        if args.all:
            done = await purge_all(bus, args.service)
        else:
            done = []
            for id_ in args.ids:
                try:
                    await purge(bus, id_)
                except DeadLetterError as e:
                    print(f"aes dlq: {e}", file=sys.stderr)
                    continue
                done.append(id_)
        print(f"purged {len(done)} dead letters" + (f": {', '.join(map(str, done))}" if done else ""))
        return 0 if args.all or len(done) == len(args.ids) else 1
    return _main(go)


def _checked(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def wrapper(args: argparse.Namespace) -> int:
        if (why := _chosen(args)) is not None:
            raise CommandError(f"{args.dlq_command}: {why}")
        return run(args)
    return wrapper


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"a letter id is a positive stream sequence, got {text}")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dlq", help="dead letters: messages a service gave up on")
    ps = p.add_subparsers(dest="dlq_command", required=True)
    ls = ps.add_parser("list", help="one line per dead letter, then counts by consumer and fault")
    ls.add_argument("--service", help="only this service's letters")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=_list)
    sh = ps.add_parser("show", help="one letter in full, with its message decoded")
    sh.add_argument("id", type=_positive)
    sh.set_defaults(func=_show)
    for name, run, what in (("replay", _replay, "publish the original messages again, then delete their letters"),
                            ("purge", _purge, "delete letters")):
        c = ps.add_parser(name, help=what)
        c.add_argument("ids", nargs="*", type=_positive, metavar="ID")
        c.add_argument("--all", action="store_true", help="every letter (of --service, when given)")
        c.add_argument("--service", help="with --all: only this service's letters")
        c.set_defaults(func=_checked(run))
