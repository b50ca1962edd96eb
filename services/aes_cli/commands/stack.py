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
import logging
import os
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
    service_cls = load_service(args.name)
    ranks = _learner_ranks(service_cls, args)
    if args.replicas > 1:
        if ranks:
            raise CommandError("--replicas and --nproc/--nnodes do not combine: a learner is one consumer")
        return _replicas(args.name, args.replicas)
    from aes_lib.learner.distributed import under_torchrun

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    ready = args.ready_file.touch if args.ready_file else None
    if under_torchrun():  # one rank of a learner (the launcher below started us)
        from aes_services.learner_ranks import run_rank

        run_rank(service_cls, Settings.from_env(), ready)
        return 0
    if ranks:
        _torchrun(args, *ranks)  # does not return
    from aes_lib.bus import run_service
    from aes_lib.bus.runner import new_event_loop

    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        runner.run(run_service(service_cls(), Settings.from_env(), on_ready=ready))
    return 0


def _learner_ranks(service_cls: type, args: argparse.Namespace) -> tuple[int, int] | None:
    """(processes per node, nodes) when the service is a learner on several ranks, else None."""
    from aes_services.learner import LearnerService

    if not issubclass(service_cls, LearnerService):
        if args.nproc or args.nnodes > 1:
            raise CommandError(f"--nproc/--nnodes run a learner on several ranks; {args.name} is not a learner")
        return None
    from aes_lib.learner import LearnerConfig

    nproc = args.nproc or LearnerConfig.from_env().nproc
    if nproc < 1 or args.nnodes < 1:
        raise CommandError(f"--nproc and --nnodes must be >= 1, got {nproc} and {args.nnodes}")
    if args.nnodes > 1 and not args.rdzv_endpoint:
        raise CommandError("--nnodes > 1 needs --rdzv-endpoint HOST:PORT (the same on every node)")
    return (nproc, args.nnodes) if nproc * args.nnodes > 1 else None


def _torchrun(args: argparse.Namespace, nproc: int, nnodes: int) -> None:
    """Become torchrun's agent, which starts the ranks (``aes service NAME`` again) and restarts
    them all when one dies; signals sent to this process reach it."""
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}", f"--nnodes={nnodes}",
           f"--max-restarts={args.max_restarts}"]
    if nnodes == 1:
        cmd.append("--standalone")
    else:
        cmd += ["--rdzv-backend=c10d", f"--rdzv-endpoint={args.rdzv_endpoint}", f"--rdzv-id={args.name}"]
    cmd += ["-m", "aes_cli.main", "service", args.name]
    if args.ready_file:
        cmd += ["--ready-file", str(args.ready_file)]
    sys.stdout.flush()
    os.execv(sys.executable, cmd)


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
    p.add_argument("--nproc", type=int, default=0,
                   help="learner only: ranks on this node, launched with torchrun (default AES_LEARNER_NPROC, 1)")
    p.add_argument("--nnodes", type=int, default=1, help="learner only: nodes, each running this command")
    p.add_argument("--rdzv-endpoint", default="", metavar="HOST:PORT",
                   help="learner on several nodes: where their ranks meet (torchrun's c10d rendezvous)")
    p.add_argument("--max-restarts", type=int, default=10,
                   help="learner on several ranks: times torchrun restarts all ranks after one dies")
    p.set_defaults(func=_service)
