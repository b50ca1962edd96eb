"""Entry point of ``aes``: every module in ``aes_cli.commands`` adds its subcommands.

A command module defines ``register(sub)`` that calls ``sub.add_parser(...)`` and
sets ``func=callable(args) -> int`` as the parser default.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from aes_cli import commands


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aes", description="AutoEnvScaling: terminal agents build their own RL environments.")
    sub = parser.add_subparsers(dest="command", required=True)
    for mod in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        importlib.import_module(f"aes_cli.commands.{mod.name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
