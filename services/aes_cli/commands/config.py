"""``aes config show``: the effective configuration and where each value came from."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from aes_cli.output import print_json


def _show(args: argparse.Namespace) -> int:
    from aes_lib import runconfig  # every settings class, the learner's with torch: only when asked

    entries = runconfig.effective()
    if args.toml:
        print(runconfig.to_toml(entries), end="")
    elif args.json:
        print_json([e._asdict() for e in entries])
    else:
        table = Table("section", "key", "value", "source")
        for e in entries:
            table.add_row(e.section, e.key, repr(e.value) if isinstance(e.value, str) else str(e.value), e.source,
                          style=None if e.source == "default" else "bold")
        Console(soft_wrap=True).print(table)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="the run's configuration (config file < environment < --set)")
    actions = p.add_subparsers(dest="action", required=True)
    show = actions.add_parser("show", help="every setting's effective value and its source")
    form = show.add_mutually_exclusive_group()
    form.add_argument("--toml", action="store_true", help="print it as a config file instead (secrets left out)")
    form.add_argument("--json", action="store_true", help="print it as a JSON list instead")
    show.set_defaults(func=_show)
