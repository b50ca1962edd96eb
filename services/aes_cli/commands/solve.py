"""``aes solve TASK_DIR``: one solver attempt on a task; prints the reward."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from aes_lib.agents.loop import LoopLimits
from aes_lib.agents.solver import rollout
from aes_lib.blobstore import open_store
from aes_lib.bundle import Task
from aes_lib.config import Settings
from aes_lib.models import chat_client, usd
from aes_lib.models.serve import endpoint
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import ImageCache


async def _solve(task: Task, url: str, model: str, settings: Settings, limits: LoopLimits) -> int:
    async with chat_client(settings, url=url, model=model) as client:
        await client.probe()  # an unreachable endpoint or a refused key, before Docker builds anything
        r = await rollout(task, client, ImageCache(kinds=DomainKinds()),
                          open_store(settings.blob_location, settings), limits,
                          env_id=task.name)
    t = r.trajectory
    for turn in t.turns:
        shown = turn.command or ("(format error)" if turn.format_error else "(done)")
        print(f"[{turn.index}] $ {shown.splitlines()[0] if shown else ''}  -> exit {turn.exit_code}")
    print(f"stop: {t.stop_reason}; turns: {len(t.turns)}; format errors: {t.format_errors}; "
          f"tokens: {t.prompt_tokens}+{t.completion_tokens}; cost: {usd(t.cost_usd, 6)}")
    print(f"trajectory: {r.ref.key}")
    print(f"reward: {t.reward:g}")
    return 0


def _run(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    task = Task.load(args.task_dir)
    limits = LoopLimits(max_turns=args.max_turns, time_limit_s=args.time_limit)
    with endpoint(args.model_url or settings.model_url, settings.home) as url:
        return asyncio.run(_solve(task, url, args.model or settings.model, settings, limits))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("solve", help="run the solver once on a task directory and print the reward")
    p.add_argument("task_dir", type=Path)
    p.add_argument("--model-url", default="", help="OpenAI-compatible endpoint (.../v1); default: AES_MODEL_URL, "
                   "else the local SmolLM2 served for this run")
    p.add_argument("--model", default="", help="model name; default: AES_MODEL")
    p.add_argument("--max-turns", type=int, default=LoopLimits.max_turns)
    p.add_argument("--time-limit", type=float, default=LoopLimits.time_limit_s, help="seconds")
    p.set_defaults(func=_run)
