"""Running flywheel services on a real bus inside a test."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys

from aes_lib.bus import Bus, serve


AES = [sys.executable, "-m", "aes_cli.main"]


async def aes(settings, *args) -> str:
    """``aes ARGS`` against the test's bus and store; its stdout (it must exit 0). Stderr stays
    apart, so a log line there cannot pass for what a command prints."""
    env = dict(os.environ, AES_NATS_URL=settings.nats_url, AES_NATS_USER=settings.nats_user,
               AES_NATS_PASSWORD=settings.nats_password, AES_HOME=str(settings.home), AES_BLOB_URL=settings.blob_url)
    p = await asyncio.create_subprocess_exec(*AES, *args, env=env, stdout=asyncio.subprocess.PIPE,
                                             stderr=asyncio.subprocess.PIPE)
    out, err = await p.communicate()
    assert p.returncode == 0, (out + err).decode()
    return out.decode()


@contextlib.asynccontextmanager
async def running(settings, *services, bus_type: type[Bus] = Bus):
    """Each service on its own connection (as separate processes would be), drained on exit."""
    stop = asyncio.Event()
    buses = [await bus_type.connect(settings, name=s.name) for s in services]
    tasks = [asyncio.create_task(serve(s, b, stop)) for s, b in zip(services, buses)]
    try:
        yield
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        for b in buses:
            await b.close()


class EngineAtV0:
    """An engine that serves the base weights (v0), as every wave of these tests asks."""

    async def version(self) -> int:
        return 0


def training_rollouts(runner, config=None):
    """The training-rollout service with ``runner`` in front of an engine at v0."""
    from aes_lib.flywheel.training import TrainingConfig
    from aes_services.training import TrainingRolloutService

    class Rollouts(TrainingRolloutService):
        async def setup(self, ctx) -> None:
            self.engine = EngineAtV0()

    return Rollouts(runner=runner, config=config or TrainingConfig())


async def wait_for(bus: Bus, subject: str, type_, predicate, poll: float = 0.2):
    """Messages stored on ``subject`` once ``predicate(messages)`` holds (the test's timeout bounds it)."""
    while True:
        try:
            msgs = await bus.history(subject, type_, timeout=0.2)
        except asyncio.TimeoutError:
            # nats-py's fetch sometimes raises the plain asyncio error, which Bus.history
            # does not treat as "no more messages"; reported to the bus owner.
            continue
        if predicate(msgs):
            return msgs
        await asyncio.sleep(poll)


async def drain_workqueue(bus: Bus, subject: str, type_, n: int, timeout: float = 0.5):
    """Take ``n`` messages off a work-queue subject (as its consumer would)."""
    from aes_proto.codec import decode
    from aes_lib.bus import stream_for
    import nats

    sub = await bus.js.pull_subscribe(subject, durable=None, stream=stream_for(subject))
    out = []
    try:
        while len(out) < n:
            try:
                msgs = await sub.fetch(n - len(out), timeout=timeout)
            except (nats.errors.TimeoutError, asyncio.TimeoutError):
                continue
            for m in msgs:
                out.append(decode(m.data, type_))
                await m.ack()
    finally:
        await sub.unsubscribe()
    return out


async def idle(bus: Bus, service) -> None:
    """Until ``service``'s consumer has nothing pending and nothing unacknowledged. A consumer
    not created yet (its service is still starting, e.g. restarted after a kill) has consumed
    nothing: waited for too, never taken as idle."""
    from nats.js.errors import NotFoundError

    from aes_lib.bus import stream_for

    while True:
        try:
            info = await bus.js.consumer_info(stream_for(service.subject), service.name)
        except NotFoundError:
            info = None
        if info is not None and info.num_pending == 0 and info.num_ack_pending == 0:
            return
        await asyncio.sleep(0.1)


def all_services(config):
    """One of every pipeline service (the learner aside); the solver runners come from
    the bus settings (``model_url``), as in production."""
    from aes_services.calibrator import CalibratorService
    from aes_services.planner import PlannerService, RolloutStatsService
    from aes_services.pool import PolicyWatchService, PoolReviewService, PoolService
    from aes_services.proposer import ProposerService
    from aes_services.registry import ADMISSION, SERVICES, service_class

    # Every admission gate the stack starts (the default route's), so a new one cannot be left out.
    gates = tuple(service_class(SERVICES[name])() for name in ADMISSION if name != "calibrator")
    for gate in gates:  # as the calibrator: the config's revision budget, not the environment's
        gate.max_revisions = config.max_revisions
    return (
        ProposerService(), *gates,
        CalibratorService(config=config), PoolService(config), PoolReviewService(config=config),
        PolicyWatchService(config), RolloutStatsService(), PlannerService(config),
    )


HELDOUT = ("Write a bash script that rotates the nginx access logs every night, compresses the old ones "
           "with gzip and keeps exactly fourteen days of history in /var/log/nginx/archive.")
"""A benchmark-like held-out instruction that no seed task shares a 13-gram with."""


async def register_heldout(bus: Bus) -> None:
    """Register a real held-out index, so the contamination gate checks candidates as in production."""
    from aes_lib.contamination import KV_BUCKET, HeldoutTask, NgramIndex, register, save_index

    index = NgramIndex.build([HeldoutTask("heldout/nginx-logrotate", HELDOUT)])
    await register(await bus.kv(KV_BUCKET), save_index(bus.blobs, index))


def one_turn_solve(seed) -> str:
    """A solver reply that solves ``seed`` in one command (for ``solver_max_turns=1``)."""
    solve = (seed / "solution" / "solve.sh").read_text()
    return f"```bash\ncat > /tmp/solve.sh <<'AES_EOF'\n{solve}\nAES_EOF\nbash /tmp/solve.sh\n```"


GIVE_UP_ONE = "TASK_DONE"


def routed_replay(solver_replies, review_reply):
    """A replayed model that answers the task reviewer with ``review_reply`` every time and
    the solver with the next of ``solver_replies``: a reviewer retry or a restarted
    service cannot shift the solver's script. (Stands in for a hosted model.)"""
    from replay_server import ReplayServer

    class RoutedReplay(ReplayServer):
        def _answer(self, body):
            system = (body.get("messages") or [{}])[0].get("content", "")
            if system.startswith("You review a terminal task"):
                return self.completion(body, review_reply)
            return super()._answer(body)

    return RoutedReplay(list(solver_replies))
