"""The chaos run's verdict: lost, doubled and dead-lettered candidates, dead letters by fault,
failed deliveries from the service logs, on the console and as ``bench/results/chaos.md``."""

from __future__ import annotations

import collections
import contextlib
import datetime
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

from aes_proto import subjects
from aes_proto.messages import DeadLetter

from chaos.accounting import Tally, outcome
from chaos.faults import Chaos
from chaos.procs import ROOT
from chaos.stack import ROUTE, SERVICES
from chaos.workload import Candidate


class Report:
    def __init__(self, args, run, cands, t: Tally, chaos: Chaos, poison, elapsed, timed_out, quiet, state, model,
                 logs: Path):
        self.args, self.run, self.cands, self.t, self.chaos = args, run, cands, t, chaos
        self.failures, self.failure_examples, self.log_notes = scan_logs(logs)
        self.poison, self.elapsed, self.timed_out, self.quiet, self.state = poison, elapsed, timed_out, quiet, state
        self.model_requests = getattr(model, "count", 0)
        eps = {c.msg.episode_id: c for c in cands}
        self.letters_by_ep: dict[str, list[tuple[int, DeadLetter]]] = collections.defaultdict(list)
        self.poison_letters: list[tuple[int, DeadLetter]] = []
        self.other_letters: list[tuple[int, DeadLetter | None]] = []
        for seq, d, raw in t.letters:
            if d is None:
                self.other_letters.append((seq, None))
            elif d.data in poison:
                self.poison_letters.append((seq, d))
            elif d.episode_id in eps:
                self.letters_by_ep[d.episode_id].append((seq, d))
            else:
                self.other_letters.append((seq, d))
        self.rows = []
        self.lost, self.doubled, self.dead, self.wrong = [], [], [], []
        for c in cands:
            ep = c.msg.episode_id
            res = t.results.get(ep, [])
            dl = self.letters_by_ep.get(ep, [])
            if not res and not dl:
                self.lost.append(c)
            if len(res) > 1:
                self.doubled.append(c)
            if dl and not res:
                self.dead.append(c)
            if res and any(outcome(r) != c.expected for _, r in res):
                self.wrong.append(c)
        self.unexplained = [(s, d) for s, d in [(s, d) for v in self.letters_by_ep.values() for s, d in v]
                            + self.poison_letters + [x for x in self.other_letters if x[1] is not None]
                            if not d.error.strip() or not getattr(d, "fault", "")]
        self.unexplained += [x for x in self.other_letters if x[1] is None]
        self.poison_missing = [p for p in poison if not any(d.data == p for _, d in self.poison_letters)]
        self.poison_wrong_fault = [(s, d) for s, d in self.poison_letters if getattr(d, "fault", "") != "malformed"]
        self.inter_doubles = {subj: sum(1 for ep, n in c.items() if n > 1 and ep in eps)
                              for subj, c in t.intermediate.items()}

    @property
    def problems(self) -> bool:
        """Anything worth keeping the logs for."""
        return not self.ok or bool(self.chaos.crashes or self.wrong or self.dead or self.log_notes)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.doubled or self.unexplained or self.poison_missing or self.poison_wrong_fault
                    or self.timed_out)

    def counts(self) -> list[tuple[str, object]]:
        kills = self.chaos.kills
        return [
            ("candidates", f"{len(self.cands)} ({', '.join(f'{k} {v}' for k, v in sorted(collections.Counter(c.kind for c in self.cands).items()))})"),
            ("with exactly one final result", sum(1 for c in self.cands if len(self.t.results.get(c.msg.episode_id, [])) == 1)),
            ("lost (no result, no dead letter)", len(self.lost)),
            ("doubled (more than one final result stored)", len(self.doubled)),
            ("dead-lettered (no final result)", len(self.dead)),
            ("final result other than the expected one", len(self.wrong)),
            ("dead letters, total", len(self.t.letters)),
            ("  of poison messages (expected: malformed)", f"{len(self.poison_letters)} of {len(self.poison)} poison published"),
            ("  concerning candidates", sum(len(v) for v in self.letters_by_ep.values())),
            ("  other", len(self.other_letters)),
            ("dead letters without error or fault", len(self.unexplained)),
            ("poison not dead-lettered / not `malformed`", f"{len(self.poison_missing)} / {len(self.poison_wrong_fault)}"),
            ("undecodable messages on aes.result.calibration (the poison)", self.t.undecodable_results),
            ("doubled intermediate results (validation / contamination / gate)",
             " / ".join(str(self.inter_doubles.get(s, 0)) for s in (subjects.RESULT_VALIDATION, subjects.RESULT_CONTAMINATION, subjects.RESULT_GATE))),
            ("kills", f"{sum(kills.values())}: " + ", ".join(f"{k} {v}" for k, v in sorted(kills.items()))),
            ("store outages / hung reads", f"{sum(1 for e in self.chaos.events if e.what == 'store outage')} "
                                          f"({self.args.outage:.0f}s) / {sum(1 for e in self.chaos.events if e.what == 'hung read')} ({self.args.hung_read:.0f}s)"),
            ("services that exited by themselves", len(self.chaos.crashes)),
            ("consumers at the end (pending/unacked)", " ".join(f"{k}={p}/{a}" for k, (p, a) in self.state.items())),
            ("solver model requests", self.model_requests),
            ("run time", f"{self.elapsed:.0f}s" + (" (time limit hit)" if self.timed_out else "") + (" (stopped: no progress)" if self.quiet else "")),
            ("verdict", "PASS" if self.ok else "FAIL"),
        ]

    def failure_lines(self) -> list[str]:
        out: list[str] = []
        for (svc, fault), n in sorted(self.failures.items()):
            out.append(f"{svc} {fault}: {n}")
            out += [f"  e.g. {line}" for line in self.failure_examples.get((svc, fault), [])]
        return (out or ["(none)"]) + self.log_notes

    def console(self) -> str:
        rows = self.counts()
        w = max(len(k) for k, _ in rows)
        lines = ["", "=" * 72, f"chaos run {self.run}"] + [f"  {k:<{w}}  {v}" for k, v in rows]
        lines += ["", "dead letters by fault:"] + [f"  {line}" for line in self.letter_lines()]
        lines += ["", "failed deliveries (redelivered) by service and fault, from the service logs:"]
        lines += [f"  {line}" for line in self.failure_lines()]
        lost = "UNFINISHED (time limit)" if self.timed_out else "LOST"
        for title, group in ((lost, self.lost), ("DOUBLED", self.doubled), ("WRONG OUTCOME", self.wrong)):
            for c in group:
                lines.append(f"  {title}: {self.describe(c)}")
        lines += [f"  CRASH: {c}" for c in self.chaos.crashes]
        return "\n".join(lines)

    def describe(self, c: Candidate) -> str:
        res = self.t.results.get(c.msg.episode_id, [])
        dl = self.letters_by_ep.get(c.msg.episode_id, [])
        got = ", ".join(f"seq {s} {outcome(r)} key={r.idempotency_key}" for s, r in res) or "no result"
        dls = "; ".join(f"dlq {d.consumer} {getattr(d, 'fault', '?')}: {d.error[:160]}" for _, d in dl)
        return f"{c.msg.episode_id} ({c.kind}, expected {c.expected}, env {c.msg.env_id[:12]}): {got}" + (f"; {dls}" if dls else "")

    def letter_lines(self) -> list[str]:
        lines = []
        all_letters = [(s, d, "poison") for s, d in self.poison_letters]
        all_letters += [(s, d, ep) for ep, v in self.letters_by_ep.items() for s, d in v]
        all_letters += [(s, d, "?") for s, d in self.other_letters]
        by_fault: dict[str, list] = collections.defaultdict(list)
        for s, d, who in sorted(all_letters, key=lambda x: x[0]):
            by_fault["undecodable" if d is None else (getattr(d, "fault", "") or "(none)")].append((s, d, who))
        for fault, items in sorted(by_fault.items()):
            lines.append(f"{fault}: {len(items)}")
            for s, d, who in items:
                if d is None:
                    lines.append(f"  seq {s}: undecodable DeadLetter")
                    continue
                err = d.error.replace("\n", " ")[:200]
                cause = "" if who == "poison" else f" [{self.cause(d.created_at)}]"
                lines.append(f"  seq {s}: {who} consumer={d.consumer} subject={d.subject} deliveries={d.deliveries} "
                             f"at {time.strftime('%H:%M:%S', time.localtime(d.created_at))}: {err or '(no error)'}{cause}")
        return lines or ["(none)"]

    def cause(self, wall: float) -> str:
        """The chaos events in the few minutes before ``wall`` (what a dead letter may be explained by)."""
        near = [e for e in self.chaos.events if 0 <= wall - e.wall <= 300 and e.what in ("SIGKILL", "store outage", "hung read")]
        if not near:
            return "no chaos event in the 300s before"
        return "after " + ", ".join(f"{e.what} {e.target} at {e.t:.0f}s" for e in near[-3:])

    def markdown(self) -> str:
        a = self.args
        uname = " ".join(platform.uname())
        mem = _mem_total()
        lines = [
            "# Chaos suite (`make chaos`)",
            "",
            f"`{' '.join(['.venv/bin/python', 'bench/chaos', *sys.argv[1:]])}` "
            f"(kill interval ~{a.kill_interval:g}s, nats-server every {a.nats_every}th kill, outage {a.outage:g}s, "
            f"hung read {a.hung_read:g}s, validator budget {a.validator_budget:g}s, {a.poison} poison messages, "
            f"victims: {a.target}, seed {a.seed}" + (f", env {' '.join(a.env)}" if a.env else "") + ")",
            "",
            f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
            f"- machine: {os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0))}), {mem} RAM",
            f"- `uname -a`: {uname}",
            f"- git: {_git_rev()}",
            "- stack: nats-server (JetStream file store, auth, fixed port), SeaweedFS `weed mini` S3 blob store, "
            "replayed solver model that always gives up; services as processes: "
            + ", ".join(f"{k} x{v}" for k, v in SERVICES.items()) + f"; route {','.join(ROUTE)}",
            "",
            "## Counts",
            "",
            "| | |",
            "|---|---|",
        ]
        lines += [f"| {k} | {v} |" for k, v in self.counts()]
        lines += ["", "## Kills and outages", "",
                  "| t (s) | event | target | open candidates | victim's consumer pending/unacked | detail |",
                  "|---|---|---|---|---|---|"]
        for e in self.chaos.events:
            detail = e.detail.splitlines()[0].replace("|", "/") if e.detail else ""
            lines.append(f"| {e.t:.0f} | {e.what} | {e.target} | {e.open_candidates} | {e.busy} | {detail} |")
        lines += ["", "## Dead letters by fault", "", "```", *self.letter_lines(), "```"]
        lines += ["", "## Failed deliveries (redelivered) by service and fault, from the service logs", "",
                  "```", *self.failure_lines(), "```"]
        lost = "UNFINISHED (time limit)" if self.timed_out else "LOST"
        problems = ([f"{lost}: {self.describe(c)}" for c in self.lost] + [f"DOUBLED: {self.describe(c)}" for c in self.doubled]
                    + [f"WRONG OUTCOME: {self.describe(c)}" for c in self.wrong]
                    + [f"CRASH: {c}" for c in self.chaos.crashes])
        lines += ["", "## Problems", ""]
        lines += [f"- {p}" for p in problems] or ["none"]
        lines.append("")
        return "\n".join(lines)


_FAILED = re.compile(r"^(\S+ [\d:]+),\d+ WARNING aes\.bus: (\S+): (delivery \d+ of \S+ failed \((\w+)\).*)$", re.M)
EXAMPLES = 3
"""Log lines quoted per (service, fault)."""


def scan_logs(logs: Path) -> tuple[collections.Counter, dict[tuple[str, str], list[str]], list[str]]:
    """Failed deliveries per (service, fault) from the runner's log lines (with a few
    quoted), and notes on anything else worth a look (tracebacks, unsettled messages)."""
    failures: collections.Counter = collections.Counter()
    examples: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
    notes: list[str] = []
    for path in sorted(logs.glob("*.log")):
        if path.stem in ("nats-server", "weed"):
            continue
        text = path.read_text(errors="replace")
        for m in _FAILED.finditer(text):
            key = (m.group(2), m.group(4))
            failures[key] += 1
            if len(examples[key]) < EXAMPLES:
                examples[key].append(f"{m.group(1)[-8:]} {path.stem}: {m.group(3)[:240]}")
        unsettled = text.count("could not settle")
        if unsettled:
            notes.append(f"{path.stem}: {unsettled} messages could not be settled (ack/nak/dead-letter failed)")
        crashed = text.count("Traceback (most recent call last)")
        if crashed:
            notes.append(f"{path.stem}: {crashed} tracebacks in its log")
    return failures, examples, notes


def _mem_total() -> str:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    return "?"


def _git_rev() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        return rev + (" (with uncommitted changes)" if dirty else "")
    except OSError:
        return "?"
