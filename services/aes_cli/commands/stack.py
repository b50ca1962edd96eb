"""``aes up`` / ``aes down`` / ``aes health``: the embedded stack; ``aes service NAME``: one service.

``NAME`` is a name from ``aes_services.registry.SERVICES`` or a ``module:Class``
(a new domain gate runs without being registered). ``--replicas N`` runs N
processes that share the work through one durable consumer. A learner takes
``--nproc N [--nnodes M --rdzv-endpoint HOST:PORT]`` instead: one consumer whose
updates run on N x M FSDP2 ranks (torchrun launches them; ``AES_LEARNER_NPROC`` sets N).
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from aes_cli.output import Progress
from aes_lib.config import Settings
from aes_ops import service


def _up(args: argparse.Namespace) -> int:
    from aes_ops import stack

    with Progress("up") as progress:
        settings = stack.up(Settings.from_env(), model=not args.no_model, progress=progress.step,
                            nats_cluster=args.nats_cluster)
    print(f"stack up in {settings.home}: NATS {settings.nats_url}, blobs {settings.blob_location}, "
          f"model {settings.model_url or '-'}; logs in {settings.home / 'logs'}")
    return _report(asyncio.run(stack.health(settings)))


def _down(args: argparse.Namespace) -> int:
    from aes_ops import stack

    home = Settings.from_env().home
    stopped = stack.down(home)
    print(f"stopped: {', '.join(stopped)}" if stopped else f"no stack running in {home}")
    return 0


def _health(args: argparse.Namespace) -> int:
    from aes_ops import stack

    return _report(asyncio.run(stack.health(Settings.from_env())))


def _report(checks: list) -> int:
    for c in checks:
        print(f"{'FAIL' if not c.ok else 'WARN' if c.warning else 'ok  '} {c.part:<24} {c.detail}")
    # The model is optional (a remote endpoint may be configured later); every other part is not.
    return 0 if all(c.ok for c in checks if c.part != "model") else 1


def _service(args: argparse.Namespace) -> int:
    return service.run(args.name, service.Launch(
        replicas=args.replicas, ready_file=args.ready_file, nproc=args.nproc, nnodes=args.nnodes,
        rdzv_endpoint=args.rdzv_endpoint, max_restarts=args.max_restarts))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("up", help="start the embedded stack (NATS, blob store, local model, every service)")
    p.add_argument("--no-model", action="store_true", help="do not start the local model server")
    p.add_argument("--nats-cluster", type=int, choices=(1, 3, 5), metavar="N",
                   help="run N nats-servers (1, 3 or 5) as one JetStream cluster with N replicas of every "
                        "stream, surviving the loss of a minority (default: as before, else 1)")
    p.set_defaults(func=_up)
    sub.add_parser("down", help="stop the embedded stack (data is kept)").set_defaults(func=_down)
    sub.add_parser("health", help="check each part of the stack").set_defaults(func=_health)
    p = sub.add_parser("service", help="run one service until SIGTERM")
    p.add_argument("name", help="registered service name, or module:Class")
    p.add_argument("--replicas", type=int, default=1, help="processes sharing the work (default 1)")
    p.add_argument("--ready-file", type=Path, help="create this file once consuming (aes up waits for it)")
    p.add_argument("--nproc", type=int, default=0,
                   help="learner only: ranks on this node, launched with torchrun (default AES_LEARNER_NPROC, 1)")
    p.add_argument("--nnodes", type=int, default=1, help="learner only: nodes, each running this command")
    p.add_argument("--rdzv-endpoint", default="", metavar="HOST:PORT",
                   help="learner on several nodes: where their ranks meet (torchrun's c10d rendezvous)")
    p.add_argument("--max-restarts", type=int, default=10,
                   help="learner on several ranks: times torchrun restarts all ranks after one dies")
    p.set_defaults(func=_service)
