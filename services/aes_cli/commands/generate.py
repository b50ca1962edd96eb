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
from aes_lib.agents.proposer.boundary import MODES, Resources
from aes_lib.agents.proposer.harness import EpisodeBudget
from aes_lib.blobstore import open_store
from aes_lib.bundle import pack
from aes_lib.config import Settings
from aes_lib.domains import TERMINAL
from aes_lib.domains import get as get_domain
from aes_lib.domains import names as domain_names
from aes_lib.models import chat_client
from aes_lib.models.serve import endpoint
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import ImageCache
from aes_ops.compare import HEADER, ModeStats, run_mode


async def _generate(args: argparse.Namespace, settings: Settings, url: str, model: str,
                    progress: Progress) -> list[ModeStats]:
    async with chat_client(settings, "proposer", url=url, model=model) as client, \
            chat_client(settings, url=url, model=model) as solver:
        for c in (client, solver):  # each role's key, before Docker or any episode
            await c.probe()
        store = open_store(settings.blob_location, settings)
        parent = None
        if parent_dir := args.parent or _domain_parent(args.domain):
            packed = pack(parent_dir)
            parent = (packed.sha256, store.put_content("bundles", packed.data, suffix=".tar.gz"))
        budget = EpisodeBudget().with_loop(max_turns=args.max_turns)
        images = ImageCache(kinds=DomainKinds())
        if not args.json:
            print(HEADER)
        done = []
        for mode in args.mode:
            resources = Resources(client, store, images, settings.home / "proposer" / "generate-state.tar.gz",
                                  solver_client=solver, budget=budget)
            done.append(await run_mode(mode, args.n, resources, parent=parent, category=args.category or "",
                                       domain=args.domain, progress=progress.step))
            if not args.json:
                print(done[-1].row(), flush=True)
    return done


def _domain_parent(name: str) -> Path | None:
    """A domain task's default parent: the domain's first seed (none for terminal tasks, which
    the proposer can write from the general instructions alone)."""
    domain = get_domain(name)
    return domain.seeds[0] if name != TERMINAL and domain.seeds else None


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
    default_url, default_model, _ = settings.endpoint("proposer")
    url, model = args.model_url or default_url, args.model or default_model
    with endpoint(url, settings.home) as resolved, Progress("generate", total=args.n * len(args.mode)) as progress:
        stats = asyncio.run(_generate(args, settings, resolved, model, progress))
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
    p.add_argument("--max-turns", type=int, default=EpisodeBudget().loop.max_turns, help="agent mode: turns per episode")
    p.add_argument("--json", action="store_true", help="print one JSON array (a row per mode) instead of the table")
    p.set_defaults(func=_run)
