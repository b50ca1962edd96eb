"""``aes service NAME``: one service in this process, N replicas sharing one durable consumer,
or a learner on several ranks that torchrun launches (``aes service NAME`` again per rank)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from aes_lib.config import Settings


class ServiceUsageError(ValueError):
    """A service name nothing registers, or options that do not fit the service."""


@dataclass(frozen=True)
class Launch:
    """How to run the service (``aes service``'s options)."""

    replicas: int = 1
    ready_file: Path | None = None
    nproc: int = 0
    """Learner ranks per node; 0: ``AES_LEARNER_NPROC``."""
    nnodes: int = 1
    rdzv_endpoint: str = ""
    max_restarts: int = 10


def load_service(target: str) -> type:
    """The ``Service`` class for a registered name or a ``module:Class`` spec."""
    from aes_services.registry import SERVICES, service_class

    spec = SERVICES.get(target, target)
    if ":" not in spec:
        raise ServiceUsageError(f"unknown service {target!r}: one of {', '.join(sorted(SERVICES))}, or module:Class")
    return service_class(spec)


def run(name: str, launch: Launch) -> int:
    """Run ``name`` until SIGTERM; its exit status (a learner on several ranks: this process
    becomes torchrun's agent and does not return)."""
    service_cls = load_service(name)
    ranks = learner_ranks(service_cls, name, launch)
    if launch.replicas > 1:
        if ranks:
            raise ServiceUsageError("--replicas and --nproc/--nnodes do not combine: a learner is one consumer")
        return replicas(name, launch.replicas)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    ready: Callable[[], None] | None = launch.ready_file.touch if launch.ready_file else None
    if is_learner(service_cls):
        from aes_lib.learner.distributed import under_torchrun

        if under_torchrun():  # one rank of a learner (the launcher below started us)
            from aes_services.learner_ranks import run_rank

            run_rank(service_cls, Settings.from_env(), ready)
            return 0
    if ranks:
        torchrun(name, launch, *ranks)  # does not return
    from aes_lib.bus import run_service
    from aes_lib.bus.runner import new_event_loop

    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        runner.run(run_service(service_cls(), Settings.from_env(), on_ready=ready))
    return 0


def is_learner(service_cls: type) -> bool:
    """Whether the class is a ``LearnerService``, without importing it (torch: the ``train``
    extra, absent from the service image): a subclass has imported its module already."""
    learner = sys.modules.get("aes_services.learner")
    return learner is not None and issubclass(service_cls, learner.LearnerService)


def learner_ranks(service_cls: type, name: str, launch: Launch) -> tuple[int, int] | None:
    """(processes per node, nodes) when the service is a learner on several ranks, else None."""
    if not is_learner(service_cls):
        if launch.nproc or launch.nnodes > 1:
            raise ServiceUsageError(f"--nproc/--nnodes run a learner on several ranks; {name} is not a learner")
        return None
    from aes_lib.learner import LearnerConfig

    nproc = launch.nproc or LearnerConfig.from_env().nproc
    if nproc < 1 or launch.nnodes < 1:
        raise ServiceUsageError(f"--nproc and --nnodes must be >= 1, got {nproc} and {launch.nnodes}")
    if launch.nnodes > 1 and not launch.rdzv_endpoint:
        raise ServiceUsageError("--nnodes > 1 needs --rdzv-endpoint HOST:PORT (the same on every node)")
    return (nproc, launch.nnodes) if nproc * launch.nnodes > 1 else None


def torchrun(name: str, launch: Launch, nproc: int, nnodes: int) -> None:
    """Become torchrun's agent, which starts the ranks (``aes service NAME`` again) and restarts
    them all when one dies; signals sent to this process reach it."""
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}", f"--nnodes={nnodes}",
           f"--max-restarts={launch.max_restarts}"]
    if nnodes == 1:
        cmd.append("--standalone")
    else:
        cmd += ["--rdzv-backend=c10d", f"--rdzv-endpoint={launch.rdzv_endpoint}", f"--rdzv-id={name}"]
    cmd += ["-m", "aes_cli.main", "service", name]
    if launch.ready_file:
        cmd += ["--ready-file", str(launch.ready_file)]
    sys.stdout.flush()
    os.execv(sys.executable, cmd)


def replicas(name: str, n: int) -> int:
    """Run ``n`` single-replica processes; SIGTERM/SIGINT reach each so all of them drain."""
    procs = [subprocess.Popen([sys.executable, "-m", "aes_cli.main", "service", name]) for _ in range(n)]

    def forward(sig: int, _frame: object) -> None:
        for p in procs:
            if p.poll() is None:
                p.send_signal(sig)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    return max(p.wait() for p in procs)
