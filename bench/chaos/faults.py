"""The faults the chaos suite injects while candidates are in flight: SIGKILLs of services
(preferably mid-message) and nats-server, a short store outage, a hung read longer than a stage
budget, SeaweedFS killed; and a watch that restarts what exited by itself."""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import dataclasses
import random
import time

from chaos.accounting import Observer
from chaos.procs import ROOT, Child, _container_owners, say
from chaos.stack import Infra, service_of


@dataclasses.dataclass
class Event:
    t: float
    what: str
    target: str
    open_candidates: int
    detail: str = ""
    wall: float = dataclasses.field(default_factory=time.time)
    busy: str = ""
    """The victim's consumer at the kill: ``pending/unacked`` (unacked > 0: it had work in hand)."""


class Chaos:
    def __init__(self, infra: Infra, services: list[Child], args: argparse.Namespace, rng: random.Random) -> None:
        self.infra, self.services, self.args, self.rng = infra, services, args, rng
        self.events: list[Event] = []
        self.kills: collections.Counter = collections.Counter()
        self.crashes: list[str] = []
        self.t0 = time.monotonic()
        self.open = 0
        """Candidates without an outcome at the last progress scan."""
        self.observer: Observer | None = None
        self.published = 0
        self.finished = 0
        self.stop = asyncio.Event()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def record(self, what: str, target: str, detail: str = "", busy: str = "") -> None:
        ev = Event(self.now(), what, target, self.open, detail, busy=busy)
        self.events.append(ev)
        extra = f", its consumer pending/unacked {busy}" if busy else ""
        say(f"chaos: {what} {target}{(' ' + detail) if detail else ''} (open candidates: {self.open}{extra})")

    async def victim(self) -> tuple[Child, str]:
        """A random service process; with ``--target busy`` (default), three times in four one
        that is running a sandbox container right now (mid-message), waiting up to a kill
        interval for one to be."""
        want_busy = self.args.target == "busy" and self.rng.random() < 0.75
        give_up = time.monotonic() + (self.args.kill_interval if want_busy else 0)
        while True:
            running = await asyncio.to_thread(_container_owners)
            busy = [c for c in self.services if c.proc is not None and c.proc.pid in running and c.alive()]
            if busy or not want_busy or time.monotonic() > give_up or self.stop.is_set():
                break
            await asyncio.sleep(0.3)
        state: dict[str, tuple[int, int]] = {}
        if self.observer is not None:
            with contextlib.suppress(Exception):
                _, state = await asyncio.wait_for(self.observer.consumers_idle(), 5)
        child = self.rng.choice(busy if want_busy and busy else self.services)
        p, a = state.get(service_of(child.name), (-1, -1))
        note = f"{p}/{a}" if state else "?"
        if child in busy:
            note += ", in a container run"
        return child, note

    async def kill_service(self) -> None:
        child, busy = await self.victim()
        child.kill()
        self.kills[service_of(child.name)] += 1
        self.record("SIGKILL", child.name, busy=busy)
        await asyncio.sleep(self.rng.uniform(0.3, self.args.restart_delay))
        child.start()

    async def kill_nats(self) -> None:
        self.infra.nats.expected_down = True
        self.infra.nats.kill()
        self.kills["nats-server"] += 1
        await asyncio.sleep(self.rng.uniform(0.5, self.args.restart_delay))
        ready = await asyncio.to_thread(self.infra.start_nats)
        self.record("SIGKILL", "nats-server", f"restarted, port open after {ready:.1f}s")

    async def kill_store(self) -> None:
        """SIGKILL SeaweedFS and start it again on the same data dir and ports."""
        self.infra.weed.kill()
        self.kills["seaweedfs"] += 1
        await asyncio.sleep(self.rng.uniform(0.5, self.args.restart_delay))
        ready = await asyncio.to_thread(self.infra.start_weed)
        self.record("SIGKILL", "seaweedfs", f"restarted on the same data dir, S3 answering after {ready:.1f}s")

    async def pause_store(self, seconds: float, what: str) -> None:
        self.infra.weed.stop()
        self.record(what, "seaweedfs", f"SIGSTOP for {seconds:.0f}s")
        try:
            await asyncio.wait_for(self.stop.wait(), seconds)  # cut short when the run stops
        except asyncio.TimeoutError:
            pass
        finally:
            self.infra.weed.cont()
        self.record(f"{what} over", "seaweedfs", "SIGCONT")

    def watch(self) -> None:
        """Restart a service that exited by itself (a supervisor would), and say so."""
        for c in self.services:
            if c.proc is not None and not c.alive() and not c.expected_down:
                code = c.proc.returncode
                last = [ln.strip() for ln in c.tail(60).splitlines() if ln.strip() and not ln.startswith("=====")]
                frames = [ln for ln in last if ln.startswith('File "') and str(ROOT) in ln and "site-packages" not in ln]
                where = f" in {frames[-1]}" if frames else ""
                self.crashes.append(f"{c.name} found exited with {code} at {self.now():.0f}s{where}: "
                                    f"{last[-1][:400] if last else ''}")
                self.record("crashed", c.name, f"exit {code}; restarting. Log tail:\n{c.tail(8)}")
                c.start()
        if self.infra.nats.proc is not None and not self.infra.nats.alive() and not self.infra.nats.expected_down:
            self.crashes.append(f"nats-server exited with {self.infra.nats.proc.returncode} at {self.now():.0f}s")
            self.record("crashed", "nats-server", "restarting")
            self.infra.start_nats()

    async def run(self, stop: asyncio.Event) -> None:
        self.stop = stop
        a = self.args
        plan = ["kill"] * a.kills
        n_nats = max(1, a.kills // a.nats_every) if a.kills else 0
        for j in range(n_nats):  # spread nats-server kills over the run
            plan[min(len(plan) - 1, (j + 1) * len(plan) // (n_nats + 1))] = "nats"
        plan.insert(len(plan) // 3, "outage")
        plan.insert(2 * len(plan) // 3, "hung")
        for j in range(a.store_kills):
            plan.insert((j + 1) * len(plan) // (a.store_kills + 1), "store-kill")
        await asyncio.sleep(a.first_kill_after)
        for step in plan:
            if stop.is_set():
                return
            if step == "kill":
                await self.kill_service()
            elif step == "nats":
                await self.kill_nats()
            elif step == "outage":
                await self.pause_store(a.outage, "store outage")
            elif step == "hung":
                await self.pause_store(a.hung_read, "hung read")
            elif step == "store-kill":
                await self.kill_store()
            try:
                await asyncio.wait_for(stop.wait(), self.rng.uniform(0.5, 1.5) * a.kill_interval)
            except asyncio.TimeoutError:
                pass


# --- main ----------------------------------------------------------------------------


def chaos_seconds(args: argparse.Namespace) -> float:
    """About how long the chaos schedule runs."""
    return args.first_kill_after + (args.kills + 2) * (args.kill_interval + args.restart_delay / 2) \
        + args.outage + args.hung_read
