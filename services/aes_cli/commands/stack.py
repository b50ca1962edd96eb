"""``aes up`` / ``aes down`` / ``aes health``: the embedded stack; ``aes service NAME``: one service.

``NAME`` is a name from ``aes_services.registry.SERVICES`` or a ``module:Class``
(a new domain gate runs without being registered). ``--replicas N`` runs N
processes that share the work through one durable consumer.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import subprocess
import sys
from pathlib import Path

from aes_cli.errors import CommandError
from aes_cli.output import Progress
from aes_lib.config import Settings


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


def load_service(target: str):
    """The ``Service`` class for a registered name or a ``module:Class`` spec."""
    from aes_services.registry import SERVICES, service_class

    spec = SERVICES.get(target, target)
    if ":" not in spec:
        raise CommandError(f"unknown service {target!r}: one of {', '.join(sorted(SERVICES))}, or module:Class")
    return service_class(spec)


def _service(args: argparse.Namespace) -> int:
    if args.replicas > 1:
        return _replicas(args.name, args.replicas)
    from aes_lib.bus import run_service
    from aes_lib.bus.runner import new_event_loop

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    service = load_service(args.name)()
    ready = args.ready_file.touch if args.ready_file else None
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        runner.run(run_service(service, Settings.from_env(), on_ready=ready))
    return 0


def _replicas(name: str, n: int) -> int:
    """Run ``n`` single-replica processes; SIGTERM/SIGINT reach each so all of them drain."""
    procs = [subprocess.Popen([sys.executable, "-m", "aes_cli.main", "service", name]) for _ in range(n)]

    def forward(sig: int, _frame: object) -> None:
        for p in procs:
            if p.poll() is None:
                p.send_signal(sig)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    return max(p.wait() for p in procs)


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
    p.set_defaults(func=_service)
