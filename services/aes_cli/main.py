"""Entry point of ``aes``: every module in ``aes_cli.commands`` adds its subcommands.

A command module defines ``register(sub)`` that calls ``sub.add_parser(...)`` and
sets ``func=callable(args) -> int`` as the parser default. Commands raise on failure;
``main`` alone turns an exception into one line and an exit status (``aes_cli.errors``).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import pkgutil
import sys
from pathlib import Path

from aes_cli import commands, output
from aes_cli.errors import Exit, report


class _Parser(argparse.ArgumentParser):
    """Every (sub)parser takes the global options, so they go before or after the subcommand."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # SUPPRESS: a subcommand's parser must not reset what the top level parsed.
        self.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                          help="on failure, the traceback instead of the one-line error")
        self.add_argument("--progress", choices=output.MODES, default=argparse.SUPPRESS,
                          help="progress on stderr: a bar, plain lines, or auto (a bar on a terminal)")
        self.add_argument("--config", type=Path, metavar="PATH", default=argparse.SUPPRESS,
                          help="the run's config file (default $AES_CONFIG, else ./aes.toml if present)")
        self.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE", dest="sets", default=argparse.SUPPRESS,
                          help="override one setting of the config file and the environment (repeatable)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="aes", description="AutoEnvScaling: terminal agents build their own RL environments.")
    parser.set_defaults(verbose=False, progress="auto", config=None, sets=[])
    parser.add_argument("--version", action="version",
                        version=f"aes {importlib.metadata.version('autoenvscaling')}")
    sub = parser.add_subparsers(dest="command", required=True)  # subparsers are _Parser too
    for mod in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        importlib.import_module(f"aes_cli.commands.{mod.name}").register(sub)
    return parser


def _configure(args: argparse.Namespace) -> None:
    """Apply ``--config``/``--set`` and check the whole configuration before the command runs.
    Without a file or an override only variables apply, each read where it is used (the
    check imports every settings class, the learner's with torch)."""
    from aes_lib.config import layers_in_use

    if args.config is not None or args.sets or layers_in_use():
        from aes_lib import runconfig

        runconfig.activate(args.config, args.sets)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    output.set_mode(args.progress)
    try:
        _configure(args)
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print(f"aes {args.command}: interrupted", file=sys.stderr)
        return Exit.INTERRUPTED
    except BrokenPipeError:
        # Python would complain again when it flushes stdout at exit: point it at /dev/null.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return Exit.PIPE_CLOSED
    except Exception as e:
        return report(e, f"aes {args.command}", args.verbose)


if __name__ == "__main__":
    sys.exit(main())
