"""Admission's read path: bundle fetches per candidate and time per candidate through the gates,
with the host's unpack cache (now) against the old path (every stage fetches, hashes and
unpacks the bundle), on one embedded stack in the same run.

The route is the product's five stages: validate, contamination, review, reset, calibrate,
each a real ``Gate`` service on the bus. Contamination is the real service with a real
held-out index; the other four read the task's files and judge nothing, standing in for the
Docker trials and model calls that are the same on both paths, so what differs is only how
each stage gets the files:

- new: the proposer's candidate carries its instruction; a stage that needs the files leases
  them from ``aes_lib.bundle.cache`` (the first stage on the host fetches, checks, unpacks);
- old: each stage fetches the bundle from the store, hashes it, unpacks it into a temporary
  folder and deletes it after (``Gate._judged`` before the cache, kept here as the baseline),
  and contamination reads ``instruction.md`` from the unpacked bundle.

Each candidate is a distinct bundle (a seed task with its own instruction line; ``large``
adds 8 MB of incompressible data), sent alone: the time is from publish to the end of the
route. Paths take turns per candidate so a shared machine's drift hits both alike; medians.
Fetches are counted at the store (every read of the bundle's key).

Run: ``.venv/bin/python bench/admission_bench.py [--candidates 12]``; writes
``bench/results/admission_bench.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import hashlib
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import nats.errors

from aes_proto import decode, subjects
from aes_proto.messages import Assignment, CandidateEnv, Lineage, Verdict

from aes_ops import stack
from aes_lib import faults
from aes_lib.agents.proposer.candidate import candidate_env
from aes_lib.blobstore import open_store
from aes_lib.bundle import BundleError, Task, pack, unpack
from aes_lib.bundle.cache import Lease
from aes_lib.bus import serve, stream_for
from aes_lib.config import Settings
from aes_lib.contamination import KV_BUCKET, HeldoutTask, NgramIndex, register, save_index
from aes_lib.gate import Gate
from aes_lib.service import Context
from aes_services.contamination import ContaminationService

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from counting_store import CountingStore, bus_over  # noqa: E402

SEED = ROOT / "seeds" / "csv-sales-rollup"
ROUTE = ("validate", "contamination", "review", "reset", "calibrate")
HELDOUT = ("Write a bash script that rotates the nginx access logs every night, compresses the old ones "
           "with gzip and keeps exactly fourteen days of history in /var/log/nginx/archive.")


class ReadsFiles(Gate):
    """A stage that needs the task's files (validate, review, reset, the calibrator's runner)."""

    async def judge(self, task: Task, candidate: CandidateEnv, ctx: Context) -> Verdict:
        (task.tests_dir / "test.sh").read_bytes()
        return Verdict(stage=self.stage, ok=True, reason="ok")


class OldPath:
    """The read path before the unpack cache: fetch, hash and unpack in every stage."""

    async def judge_message(self, candidate, ctx):
        return None

    async def _lease(self, msg, ctx):
        data = await faults.call(ctx.blobs.get_bytes, msg.bundle, deadline=ctx.settings.io_deadline,
                                 what=f"{self.stage}: read bundle {msg.bundle.key}")
        digest = hashlib.sha256(data).hexdigest()
        if digest != msg.env_id:
            return self.invalid(f"env_id {msg.env_id[:12]} is not the bundle's sha256 {digest[:12]}")
        tmp = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix=f"aes-{self.stage}-"))
        try:
            task = await asyncio.to_thread(unpack, data, tmp / "task", self.limits)
        except BundleError as e:
            shutil.rmtree(tmp, True)
            return self.invalid(f"{type(e).__name__}: {e}")
        return Lease(task, False, None, tmp)


def stages(old: bool) -> list[Gate]:
    """The five stages of one path."""
    out: list[Gate] = []
    for s in ROUTE:
        base = ContaminationService if s == "contamination" else ReadsFiles
        name = f"{'Old' if old else 'New'}{s.title()}"
        out.append(type(name, ((OldPath,) if old else ()) + (base,), {"stage": s, "max_revisions": 0})())
    return out


def bundles(work: Path, n: int, large: bool) -> list[Path]:
    dirs = []
    for i in range(n):
        d = work / f"{'large' if large else 'small'}-{i}"
        shutil.copytree(SEED, d)
        with open(d / "instruction.md", "a") as f:
            f.write(f"\n(Candidate {i}{' large' if large else ''}.)\n")
        if large:
            (d / "environment" / "data.bin").write_bytes(os.urandom(8 << 20))
        dirs.append(d)
    return dirs


class PathStack:
    """One path's stack (nats-server, file store, its five gate services) in its own AES_HOME."""

    def __init__(self, old: bool) -> None:
        self.old = old
        self.home = Path(tempfile.mkdtemp(prefix="aes-bench-"))

    async def __aenter__(self) -> "PathStack":
        self.settings = stack.up(Settings(home=self.home), services={}, model=False)
        self.store = CountingStore(open_store(self.settings.blob_location))
        buses = bus_over(self.store)
        self.bus = await buses.connect(self.settings, name="bench")
        index = save_index(self.store, NgramIndex.build([HeldoutTask("heldout/nginx", HELDOUT)]))
        await register(await self.bus.kv(KV_BUCKET), index)
        self.stop = asyncio.Event()
        self.runners = []
        for g in stages(self.old):
            b = await buses.connect(self.settings, name=g.name)
            self.runners.append((asyncio.create_task(serve(g, b, self.stop)), b))
        self.done = await self.bus.js.pull_subscribe(subjects.stage("done"), durable="bench-done",
                                                     stream=stream_for(subjects.stage("done")))
        return self

    async def __aexit__(self, *exc) -> None:
        self.stop.set()
        await asyncio.gather(*(t for t, _ in self.runners), return_exceptions=True)
        for _, b in self.runners:
            await b.close()
        await self.bus.close()
        stack.down(self.home)
        shutil.rmtree(self.home, ignore_errors=True)

    async def through(self, d: Path) -> tuple[float, int, int]:
        """Seconds from publish to the end of the route, fetches of the bundle, archive bytes."""
        packed = pack(d)
        ref = self.store.put_content("bundles", packed.data, suffix=".tar.gz")
        a = Assignment(idempotency_key=d.name, episode_id=d.name, direction="new", lineage=Lineage(assignment_id=d.name))
        c = candidate_env(a, packed, ref, ROUTE + ("done",), model="bench", cost_usd=0.0, prompt_tokens=0,
                          completion_tokens=0, episode=None)
        before = self.store.reads[ref.key]
        t0 = time.perf_counter()
        await self.bus.publish(subjects.stage(ROUTE[0]), c)
        out = await take(self.done)
        seconds = time.perf_counter() - t0
        assert out.env_id == c.env_id and all(v.ok for v in out.verdicts), out.verdicts
        return seconds, self.store.reads[ref.key] - before, len(packed.data)


async def run(n: int) -> str:
    work = Path(tempfile.mkdtemp(prefix="aes-bench-tasks-"))
    rows = []
    try:
        async with PathStack(old=True) as old_path, PathStack(old=False) as new_path:
            for large in (False, True):
                count = n if not large else max(2, n // 3)
                times: dict[str, list[float]] = {"old": [], "new": []}
                fetches: dict[str, list[int]] = {"old": [], "new": []}
                size = 0
                for i, d in enumerate(bundles(work, count, large)):
                    for p in (("old", "new") if i % 2 == 0 else ("new", "old")):
                        seconds, reads, size = await (old_path if p == "old" else new_path).through(d)
                        times[p].append(seconds)
                        fetches[p].append(reads)
                old, new = statistics.median(times["old"]), statistics.median(times["new"])
                rows.append(f"| {'large' if large else 'small'} | {size / 1024:,.0f} KiB | {count} "
                            f"| {statistics.mean(fetches['old']):.1f} | {statistics.mean(fetches['new']):.1f} "
                            f"| {old * 1000:.0f} | {new * 1000:.0f} | {new / old:.2f} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load = os.getloadavg()[0]
    return "\n".join([
        "# Admission: bundle fetches and time per candidate, unpack cache vs the old path",
        "",
        f"- Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- Machine: {os.cpu_count()} CPUs ({platform.machine()}), Python {platform.python_version()}, "
        f"load average at the end {load:.1f}; one embedded stack per path (nats-server, file blob store on local disk)",
        f"- Route: {', '.join(ROUTE)} (contamination real with a registered index, the others read the files and "
        "judge nothing); each candidate a distinct bundle, sent alone; paths take turns; medians",
        "- Produced by `bench/admission_bench.py`",
        "",
        "| bundle | archive | candidates | fetches/candidate old | fetches/candidate new | ms/candidate old "
        "| ms/candidate new | new / old |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        "",
    ])


async def take(sub) -> CandidateEnv:
    while True:
        try:
            [m] = await sub.fetch(1, timeout=1)
        except (nats.errors.TimeoutError, asyncio.TimeoutError):
            continue
        await m.ack()
        return decode(m.data, CandidateEnv)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--candidates", type=int, default=12)
    args = p.parse_args()
    text = asyncio.run(run(args.candidates))
    out = ROOT / "bench" / "results" / "admission_bench.md"
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
