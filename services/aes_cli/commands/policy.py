"""``aes policy export VERSION DIR``: a published policy version as a folder transformers loads.

The learner publishes every version as an HF-format folder in the blob store
(``aes_lib.checkpoints``); this fetches the one announced as VERSION (digests checked)
into DIR: ``AutoModelForCausalLM.from_pretrained(DIR)``, vLLM or another trainer take
it as it is. Exit 2 for a version never announced or a DIR that holds something else.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from aes_cli.errors import CommandError, Exit
from aes_lib.config import Settings
from aes_ops.policies import export_version


def _run(args: argparse.Namespace) -> int:
    dest = args.dir.resolve()
    if dest.exists() and (not dest.is_dir() or (any(dest.iterdir()) and not (dest / "manifest.json").is_file())):
        raise CommandError(f"{dest} exists and is not an earlier export: pick a new or empty folder", Exit.USAGE)
    folder = asyncio.run(export_version(Settings.from_env(), args.version, args.policy, dest))
    print(f"policy {args.policy} v{args.version} -> {folder}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("policy", help="published policy versions")
    psub = p.add_subparsers(dest="policy_command", required=True)
    e = psub.add_parser("export", help="write a published version as an HF-format folder")
    e.add_argument("version", type=int, help="the version number PolicyVersion announced")
    e.add_argument("dir", type=Path, help="folder to write (new, empty, or an earlier export)")
    e.add_argument("--policy", default="shared", choices=("shared", "solver", "proposer"),
                   help="whose policy (separate models publish solver and proposer versions)")
    e.set_defaults(func=_run)
