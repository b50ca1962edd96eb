"""``aes generate --mode prompt|feedback|agent --n N [--domain NAME]``: compare generation modes.

Per mode: the valid-environment rate with a 95% Wilson interval and the cost per
valid environment (USD from token counts and the price table), validity judged by
the validator's library function.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
from pathlib import Path

from aes_cli.commands.domains import domain_arg
from aes_cli.output import Progress, print_json
from aes_lib.agents.proposer.boundary import MODES
from aes_lib.bundle import pack
from aes_lib.config import Settings
from aes_lib.domains import TERMINAL
from aes_lib.domains import names as domain_names
from aes_ops.compare import HEADER, Comparison, ModeStats, compare


def _as_json(stats: ModeStats) -> dict:
    """The counts, plus the rate and its interval the table shows."""
    return {**dataclasses.asdict(stats), "rate": stats.rate, "interval95": list(stats.interval)}


def _modes(text: str) -> list[str]:
    modes = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise argparse.ArgumentTypeError(f"modes are {', '.join(MODES)} (comma-separated), got {text!r}")
    return modes


def _run(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    if args.parent:
        pack(args.parent)  # a bad parent is a usage error before any model starts
    plan = Comparison(modes=args.mode, n=args.n, parent=args.parent, category=args.category or "",
                      domain=args.domain, max_turns=args.max_turns, model_url=args.model_url, model=args.model)
    with Progress("generate", total=args.n * len(args.mode)) as progress:
        stats = asyncio.run(compare(
            settings, plan, progress=progress.step,
            ready=None if args.json else lambda: print(HEADER),
            done=None if args.json else lambda s: print(s.row(), flush=True)))
    if args.json:
        print_json([_as_json(s) for s in stats])
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("generate", help="generate environments per mode; valid rate (95%% CI) and cost per valid env")
    p.add_argument("--mode", type=_modes, default=list(MODES), help="prompt,feedback,agent (comma-separated; default all)")
    p.add_argument("--n", type=int, default=4, help="generations per mode")
    p.add_argument("--model-url", default="", help="OpenAI-compatible endpoint (.../v1); default: AES_PROPOSER_MODEL_URL "
                   "or AES_MODEL_URL, else the local SmolLM2 served for this run")
    p.add_argument("--model", default="", help="model name (priced from the table; AES_MODEL_PRICES adds prices)")
    p.add_argument("--parent", type=Path, help="a task directory to build variants of (e.g. seeds/csv-sales-rollup)")
    p.add_argument("--category", default=None, help="category written into the assignment")
    p.add_argument("--domain", type=domain_arg, default=TERMINAL,
                   help=f"kind of environment: {', '.join(domain_names())} (default terminal); a domain's tasks "
                        "are judged by its gate too, and its first seed is the parent unless --parent is given")
    p.add_argument("--max-turns", type=int, default=Comparison.max_turns, help="agent mode: turns per episode")
    p.add_argument("--json", action="store_true", help="print one JSON array (a row per mode) instead of the table")
    p.set_defaults(func=_run)
