"""``aes generate --mode prompt|feedback|agent --n N``: compare generation modes.

Per mode: the valid-environment rate with a 95% Wilson interval and the cost per
valid environment (USD from token counts and the price table), validity judged by
the validator's library function.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from aes_lib.agents.proposer.boundary import MODES, Resources
from aes_ops.compare import HEADER, run_mode
from aes_lib.agents.proposer.harness import EpisodeBudget
from aes_lib.blobstore import open_store
from aes_lib.bundle import BundleError, pack
from aes_lib.config import Settings
from aes_lib.models import chat_client
from aes_lib.models.serve import endpoint
from aes_lib.sandbox import ImageCache


async def _generate(args: argparse.Namespace, settings: Settings, url: str, model: str) -> int:
    store = open_store(settings.blob_location, settings)
    parent = None
    if args.parent:
        packed = pack(args.parent)
        parent = (packed.sha256, store.put_content("bundles", packed.data, suffix=".tar.gz"))
    budget = EpisodeBudget().with_loop(max_turns=args.max_turns)
    images = ImageCache()
    print(HEADER)
    for mode in args.mode:
        async with chat_client(settings, "proposer", url=url, model=model) as client, \
                chat_client(settings, url=url, model=model) as solver:
            resources = Resources(client, store, images, settings.home / "proposer" / "generate-state.tar.gz",
                                  solver_client=solver, budget=budget)
            stats = await run_mode(mode, args.n, resources, parent=parent, category=args.category or "")
        print(stats.row(), flush=True)
    return 0


def _modes(text: str) -> list[str]:
    modes = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise argparse.ArgumentTypeError(f"modes are {', '.join(MODES)} (comma-separated), got {text!r}")
    return modes


def _run(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    if args.parent:
        try:
            pack(args.parent)
        except BundleError as e:
            print(f"invalid parent task: {type(e).__name__}: {e}")
            return 2
    default_url, default_model, _ = settings.endpoint("proposer")
    url, model = args.model_url or default_url, args.model or default_model
    with endpoint(url, settings.home) as resolved:
        return asyncio.run(_generate(args, settings, resolved, model))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("generate", help="generate environments per mode; valid rate (95%% CI) and cost per valid env")
    p.add_argument("--mode", type=_modes, default=list(MODES), help="prompt,feedback,agent (comma-separated; default all)")
    p.add_argument("--n", type=int, default=4, help="generations per mode")
    p.add_argument("--model-url", default="", help="OpenAI-compatible endpoint (.../v1); default: AES_PROPOSER_MODEL_URL "
                   "or AES_MODEL_URL, else the local SmolLM2 served for this run")
    p.add_argument("--model", default="", help="model name (priced from the table; AES_MODEL_PRICES adds prices)")
    p.add_argument("--parent", type=Path, help="a task directory to build variants of (e.g. seeds/csv-sales-rollup)")
    p.add_argument("--category", default=None, help="category written into the assignment")
    p.add_argument("--max-turns", type=int, default=EpisodeBudget().loop.max_turns, help="agent mode: turns per episode")
    p.set_defaults(func=_run)
