"""One chaos run: the stack up, candidates and poison published while the faults run, progress
until every candidate has an outcome and the consumers are idle (or the limits), then the report."""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import random
import secrets
import time
from pathlib import Path

from aes_proto import subjects

from chaos.accounting import Observer, tally
from chaos.faults import Chaos, chaos_seconds
from chaos.procs import say
from chaos.report import Report
from chaos.stack import service_children, start_infra, start_model
from chaos.workload import build_candidates, register_heldout


async def main_async(args: argparse.Namespace, root: Path) -> int:
    t_start = time.monotonic()
    rng = random.Random(args.seed)
    run = secrets.token_hex(3)
    say(f"chaos run {run}: {args.candidates} candidates, {args.kills} kills, root {root}")
    infra = await asyncio.to_thread(start_infra, root)
    settings = infra.settings()
    model = start_model()
    say(f"replay model (always gives up) at {model.url}")

    await register_heldout(settings)
    cands = await asyncio.to_thread(build_candidates, settings, args.candidates, args, root / "tasks", run)
    by_kind = collections.Counter(c.kind for c in cands)
    say(f"built and stored {len(cands)} candidates: " + ", ".join(f"{k} {v}" for k, v in sorted(by_kind.items())))

    services = service_children(infra, model.url, args)
    for c in services:
        c.start()
    obs = Observer(settings)
    await obs.connect()
    # Wait until every service has bound its consumer before anything is published.
    t_ready = time.monotonic()
    while True:
        _, state = await obs.consumers_idle()
        if all(v != (-1, -1) for v in state.values()):
            break
        for c in services:
            if not c.alive():
                raise RuntimeError(f"{c.name} exited during start-up:\n{c.tail(30)}")
        if time.monotonic() - t_ready > 120:
            raise RuntimeError(f"services not ready after 120s: {state}")
        await asyncio.sleep(0.5)
    say(f"{len(services)} service processes consuming after {time.monotonic() - t_ready:.1f}s")

    poison: dict[bytes, str] = {}
    for j in range(args.poison):
        subject = subjects.stage("validate") if j % 2 == 0 else subjects.RESULT_CALIBRATION
        data = b"\xc1chaos poison " + rng.randbytes(32)  # 0xc1 is never valid msgpack
        poison[data] = subject
        await obs.publish_raw(subject, data, f"chaos-{run}-poison-{j}")
    t_pub = time.monotonic()
    # Candidates are fed over most of the chaos, so that every kill finds work in flight.
    span = args.publish_over if args.publish_over >= 0 else 0.8 * chaos_seconds(args)
    say(f"publishing {len(cands)} candidates over {span:.0f}s; {len(poison)} poison messages published")

    async def feed() -> None:
        for i, c in enumerate(cands):
            await asyncio.sleep(max(0.0, t_pub + span * i / max(1, len(cands)) - time.monotonic()))
            await obs.publish(subjects.stage("validate"), c.msg)
            chaos.published += 1
            chaos.open = chaos.published - chaos.finished
        say(f"all {len(cands)} candidates published after {time.monotonic() - t_pub:.0f}s")

    chaos = Chaos(infra, services, args, rng)
    feeder = asyncio.create_task(feed())
    chaos.t0 = t_pub
    chaos.observer = obs
    stop = asyncio.Event()
    chaos_task = asyncio.create_task(chaos.run(stop))
    deadline = t_start + args.time_limit
    last_change, last_finished, idle_since = time.monotonic(), -1, None
    timed_out = quiet = False
    t = None
    while True:
        await asyncio.sleep(args.progress)
        chaos.watch()
        try:
            t = await tally(obs, cands)
            idle, state = await obs.consumers_idle()
        except Exception as e:  # the bus may be restarting
            say(f"progress: bus unavailable ({type(e).__name__}: {e})")
            continue
        finished = t.finished(cands)
        chaos.finished = finished
        chaos.open = chaos.published - finished
        if finished != last_finished:
            last_change, last_finished = time.monotonic(), finished
        pend = " ".join(f"{k}={p}/{a}" for k, (p, a) in state.items())
        say(f"progress {chaos.now():5.0f}s: outcomes {finished}/{len(cands)}, dead letters {len(t.letters)}, "
            f"kills {sum(chaos.kills.values())} {dict(chaos.kills)}; pending/unacked {pend}")
        chaos_done = chaos_task.done() and feeder.done()
        if finished == len(cands) and chaos_done and idle:
            idle_since = idle_since or time.monotonic()
            if time.monotonic() - idle_since >= args.settle:
                break
        else:
            idle_since = None
        if time.monotonic() > deadline:
            say(f"time limit {args.time_limit:.0f}s reached")
            timed_out = True
            break
        if chaos_done and time.monotonic() - last_change > args.quiet_timeout and not (finished == len(cands) and idle):
            say(f"no progress for {args.quiet_timeout:.0f}s after the chaos ended")
            quiet = True
            break
    stop.set()
    feeder.cancel()
    with contextlib.suppress(BaseException):
        await chaos_task
    with contextlib.suppress(BaseException):
        await feeder
    # Final reading, with every service still up (a pending redelivery shows as unacked).
    for _ in range(30):
        try:
            t = await tally(obs, cands, full=True)
            idle, state = await obs.consumers_idle()
            break
        except Exception as e:
            say(f"final tally: {type(e).__name__}: {e}; retrying")
            await asyncio.sleep(2)
    elapsed = time.monotonic() - t_start
    report = Report(args, run, cands, t, chaos, poison, elapsed, timed_out, quiet, state, model, root / "logs")
    text = report.markdown()
    print(report.console(), flush=True)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        say(f"wrote {out}")
    with contextlib.suppress(Exception):
        await obs.bus.close()  # type: ignore[union-attr]
    if report.problems:
        args.keep = True
    return 0 if report.ok else 1
