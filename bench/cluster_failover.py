"""How long a three-server JetStream cluster stalls a service when its stream leader dies.

Each run brings up ``aes up --nats-cluster 3`` (no model, no services) in a temporary
AES_HOME and one ``run_service`` consumer of assignments whose handler publishes one
effect. Assignments are published at a steady rate (retrying while the cluster has no
leader; the dedupe drops repeats); a core subscription timestamps each effect. After
``--before`` messages the server leading the assignments stream is SIGKILLed. Measured in
the same run:

- normal latency: median, publish to effect, of the messages handled before the kill;
- failover: from the kill until the first effect of a message published after it;
- the longest publish-to-effect latency of any message in the run.

Run: ``.venv/bin/python bench/cluster_failover.py [--runs K] [--rate R]``; writes
``bench/results/cluster_failover.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime
import os
import signal
import statistics
import tempfile
import time
from pathlib import Path

import nats.errors

from aes_proto import subjects
from aes_proto.messages import Assignment, GateResult, Lineage

from aes_ops import stack
from aes_lib.bus import Bus, run_service, stream_for
from aes_lib.bus.client import connect
from aes_lib.config import Settings
from aes_lib.service import Context, Service
from bus_bench import machine

OUT = Path(__file__).parent / "results" / "cluster_failover.md"


class Effect(Service[Assignment]):
    name = "failover"
    subject = subjects.ASSIGNMENT
    message_type = Assignment

    async def handle(self, msg: Assignment, ctx: Context) -> None:
        await ctx.publish(subjects.RESULT_GATE, GateResult(
            idempotency_key=f"{msg.idempotency_key}:gate", episode_id=msg.episode_id,
            env_id=msg.lineage.assignment_id, gate="bench", ok=True, reason="ok"))


@dataclasses.dataclass(frozen=True)
class Run:
    normal: float
    """Median publish-to-effect seconds before the kill."""
    failover: float
    """Seconds from the kill to the first effect of a message published after it."""
    worst: float
    """Longest publish-to-effect seconds in the run."""
    retries: int
    """Publishes retried while the cluster had no leader."""


async def one_run(settings: Settings, before: int, after: int, rate: float) -> Run:
    state = stack.StackState.load(settings.home)
    assert state is not None
    effects: dict[str, float] = {}
    watcher = await connect(settings, "bench-watch")

    async def seen(msg: nats.aio.msg.Msg) -> None:
        effects.setdefault(msg.header["Nats-Msg-Id"].removesuffix(":gate"), time.monotonic())

    await watcher.subscribe(subjects.RESULT_GATE, cb=seen)
    stop = asyncio.Event()
    service = asyncio.create_task(run_service(Effect(), settings, stop=stop))
    published: dict[str, float] = {}
    retries = 0
    kill_at = 0.0
    async with await Bus.connect(settings, name="bench-publisher") as bus:
        t0 = time.monotonic()
        for i in range(before + after):
            await asyncio.sleep(max(0.0, t0 + i / rate - time.monotonic()))
            if i == before:
                leader = (await bus.js.stream_info(stream_for(subjects.ASSIGNMENT))).cluster.leader
                kill_at = time.monotonic()
                os.kill(state.nats[int(leader.removeprefix("n"))], signal.SIGKILL)
            msg = Assignment(idempotency_key=f"m-{i}", episode_id=f"ep-{i}",
                             lineage=Lineage(assignment_id=f"as-{i}"), direction="new")
            published[msg.idempotency_key] = time.monotonic()
            while True:
                try:
                    await bus.publish(subjects.ASSIGNMENT, msg)
                    break
                except nats.errors.Error:
                    retries += 1
                    await asyncio.sleep(0.05)
        while len(effects) < len(published):
            await asyncio.sleep(0.05)
    stop.set()
    await service
    await watcher.close()
    latency = {k: effects[k] - t for k, t in published.items()}
    return Run(
        normal=statistics.median(latency[k] for k in published if effects[k] < kill_at),
        failover=min(effects[k] for k, t in published.items() if t >= kill_at) - kill_at,
        worst=max(latency.values()),
        retries=retries,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rate", type=float, default=50.0, help="messages per second")
    ap.add_argument("--before", type=int, default=150, help="messages before the kill")
    ap.add_argument("--after", type=int, default=250, help="messages after the kill")
    a = ap.parse_args()
    for k in [k for k in os.environ if k.startswith("AES_")]:
        del os.environ[k]
    load = os.getloadavg()[0]
    runs: list[Run] = []
    for r in range(a.runs):
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp) / "home"
            settings = stack.up(Settings(home=home), services={}, model=False, nats_cluster=3)
            try:
                runs.append(asyncio.run(one_run(settings, a.before, a.after, a.rate)))
            finally:
                stack.down(home)
        print(f"run {r + 1}: {runs[-1]}")
    rows = "\n".join(f"| {i + 1} | {x.normal * 1e3:.1f} ms | {x.failover:.2f} s | {x.failover / x.normal:,.0f} "
                     f"| {x.worst:.2f} s | {x.retries} |" for i, x in enumerate(runs))
    med = statistics.median(x.failover for x in runs)
    OUT.write_text(f"""# JetStream cluster failover

- Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC
- Machine: {machine()}; 1-minute load average {load:.1f} at the start (other processes share the CPUs)
- Cluster: `aes up --nats-cluster 3` (three nats-servers on loopback, JetStream file storage, auth on,
  3 replicas of every stream); one `run_service` consumer in this process publishing one effect per
  assignment; {a.rate:g} msg/s, {a.before} messages before the SIGKILL of the assignments stream's leader,
  {a.after} after. `python bench/cluster_failover.py --runs {a.runs}`.

| run | normal latency (median) | failover: kill to next effect | ratio | worst latency | publish retries |
|---|---|---|---|---|---|
{rows}

Median failover {med:.2f} s. Every message got its effect in every run. The stall is the
cluster electing a new stream leader (raft election timeouts of a few seconds in nats-server), during which
JetStream answers 503 to fetches and publishes; the consumer and the publisher retry until it answers.
""")
    print(OUT.read_text())


if __name__ == "__main__":
    main()
