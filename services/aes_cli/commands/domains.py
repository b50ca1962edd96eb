"""``aes domains``: the registered domains (terminal and the ``aes.domains`` plug-ins), their gate, image and seeds."""

from __future__ import annotations

import argparse
from pathlib import Path

from aes_cli.errors import CommandError
from aes_cli.output import print_json, table
from aes_lib.domains import UnknownDomainError, get, names


def domain_arg(text: str) -> str:
    """An argparse type: a registered domain's name."""
    try:
        get(text)
    except UnknownDomainError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def _rows() -> list[dict]:
    out = []
    for name in names():
        d = get(name)
        out.append({"name": d.name, "title": d.title, "gate": d.gate or "", "image": d.image or "aes-base:latest",
                    "startup": d.startup or "", "seeds": [str(p) for p in d.seeds]})
    return out


def _run(args: argparse.Namespace) -> int:
    rows = _rows()
    if args.json:
        print_json(rows)
        return 0
    print(table(("DOMAIN", "TITLE", "GATE (route name)", "IMAGE", "SEEDS"), [
        (r["name"], r["title"], r["name"] if r["gate"] else "-", r["image"], str(len(r["seeds"]))) for r in rows]))
    return 0


def _hil(args: argparse.Namespace) -> int:
    from aes_domains.ask_human.blockers import BlockerRegistryError
    from aes_domains.ask_human.hil import SETTINGS, derive

    if not (args.task / "task.toml").is_file():
        raise CommandError(f"{args.task}: not a task folder (no task.toml)")
    if args.out.exists():
        raise CommandError(f"{args.out} exists: the three settings go to a new folder")
    try:
        for setting in SETTINGS:
            print(derive(args.task, setting, args.out / setting))
    except (BlockerRegistryError, ValueError) as e:
        raise CommandError(f"{args.task}: {e}") from None
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("domains", help="the kinds of environment this installation knows (aes generate --domain NAME)")
    p.add_argument("--json", action="store_true", help="print one JSON array instead of the table")
    p.set_defaults(func=_run)
    ds = p.add_subparsers(dest="domains_command")
    h = ds.add_parser("hil-settings", help="write an ask-human task's three settings (full_info, ask_human, "
                                           "incomplete) as task folders under OUT, without a model")
    h.add_argument("task", type=Path, help="an ask-human task folder (with tests/blockers.json)")
    h.add_argument("out", type=Path, help="a new folder for OUT/full_info, OUT/ask_human, OUT/incomplete")
    h.set_defaults(func=_hil)
