"""Verifier strength: wrong solutions the tests must fail.

Both kinds run through ``run_trial`` as the reference does, so what they show holds for training:

- **near misses** the task ships, ``solution/near_miss/*.sh``: plausible wrong solutions (an
  off-by-one boundary, a fix that also changes a line it was told to leave alone), each with a
  ``# wrong: ...`` line saying what it gets wrong. Each must score below 1.
- **mutants** of the reference's end state, derived here: the reference runs, then one file it
  wrote or changed in the result paths (found by content against the image's, ``changes``) is
  deleted, cut to its first half, or perturbed (its last number moved by one: a boundary; else one
  letter changed; a binary file's middle byte flipped). A mutant that scores 1 survived: the tests
  never looked at what it broke.

A task is ``weak_tests`` when a near miss scores 1, or when its tests need files the reference
wrote (deleting one costs reward) but none for what is in it (cutting each to half and perturbing
it both keep full reward): they check that an answer exists, not that it is right. A file whose
deletion keeps full reward is not part of the answer (a helper, a build output the tests make
again) and says nothing. A file needed only to exist beside others checked for content is
reported, not rejected: some contents are free ("a token of your choice"), and so is a number the
answer does not depend on. The specific wrong answers a task's tests must fail are its near misses. A near miss without its ``# wrong:`` line is ``near_miss_unexplained``:
the proposer reading the verdict must know what the tests missed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import re
import shlex
from collections.abc import Callable
from typing import ClassVar, Literal

from aes_lib.bundle import Task
from aes_lib.config import read_settings
from aes_lib.sandbox import changes
from aes_lib.sandbox.container import LimitCaps, Sandbox
from aes_lib.sandbox.images import ImageCache
from aes_lib.sandbox.trial import AgentOutcome, OracleAgent, TrialFault, TrialResult, run_trial
from aes_lib.sandbox.verifier import result_paths

NEAR_MISS_DIR = "near_miss"
"""Below the solution folder: the near misses, one ``*.sh`` each."""
KINDS = ("drop", "truncate", "perturb")
MUTATED = "== mutant\n"
_WRONG = re.compile(r"^#\s*wrong:\s*(\S.*)$", re.MULTILINE | re.IGNORECASE)

Reason = Literal["ok", "weak_tests", "near_miss_unexplained"]

# Runs as root in the agent's container after the reference: reads the changed files (NUL-separated)
# on stdin, applies mutant number argv[1] of (file, kind) pairs in path order, prints
# "<count>\t<kind>\t<path>\t<what>" ("<count>\tnone" past the last).
_MUTATE = r'''
import os, re, sys
KINDS = sys.argv[2].split()
SKIP = (".git", "node_modules", "__pycache__")
index = int(sys.argv[1])
paths = sorted(p for p in sys.stdin.read().split("\0") if p and os.path.isfile(p) and not os.path.islink(p)
               and not any(part in SKIP for part in p.split("/")) and not p.endswith(".pyc")
               and os.path.getsize(p) <= (8 << 20))
pairs = [(p, k) for p in paths for k in KINDS]
if index >= len(pairs):
    print(f"{len(pairs)}\tnone")
    sys.exit()
path, kind = pairs[index]
with open(path, "rb") as f:
    body = f.read()
what = ""
if kind == "drop":
    os.remove(path)
    what = "deleted"
else:
    try:
        text = body.decode()
    except UnicodeDecodeError:
        text = None
    if kind == "truncate":  # trailing white space is no content: "3\n" cut to "3" would be no change
        lines = text.rstrip().splitlines(True) if text is not None else []
        if len(lines) > 1:
            new = "".join(lines[: len(lines) // 2]).encode()
            what = f"kept the first {len(lines) // 2} of {len(lines)} lines"
        elif lines:
            new = lines[0][: len(lines[0]) // 2].encode()
            what = f"kept the first {len(lines[0]) // 2} of {len(lines[0])} characters"
        else:
            new = body[: len(body) // 2]
            what = f"kept the first {len(body) // 2} of {len(body)} bytes"
    elif text is not None and (numbers := list(re.finditer(r"\d+", text))):
        last = numbers[-1]
        moved = str(int(last.group()) + 1)
        new = (text[: last.start()] + moved + text[last.end():]).encode()
        what = f"its last number {last.group()} -> {moved} (offset {last.start()})"
    elif text is not None and (letters := list(re.finditer(r"[A-Za-z]", text))):
        at = letters[-1].start()
        c = text[at]
        other = "b" if c.lower() == "a" else "a"
        new = (text[:at] + (other.upper() if c.isupper() else other) + text[at + 1:]).encode()
        what = f"one letter changed at offset {at}"
    elif body:
        mid = len(body) // 2
        new = body[:mid] + bytes([body[mid] ^ 1]) + body[mid + 1:]
        what = f"byte {mid} flipped"
    else:
        new = b"x\n"
        what = "an empty file given a line"
    with open(path, "wb") as f:
        f.write(new)
print(f"{len(pairs)}\t{kind}\t{path}\t{what}")
'''


@dataclasses.dataclass(frozen=True)
class NearMiss:
    """A wrong solution the task ships and what it says it gets wrong ("" when it does not say)."""

    script: str
    """Its path below the solution folder (``near_miss/off_by_one.sh``)."""
    wrong: str


def near_misses(task: Task) -> list[NearMiss]:
    """The near misses of ``task`` (of its last step, for a multi-step task), in name order."""
    where = task.for_step(len(task.config.steps) - 1) if task.config.steps and task.step is None else task
    folder = where.solution_dir / NEAR_MISS_DIR
    scripts = sorted(p for p in folder.glob("*.sh") if p.is_file()) if folder.is_dir() else []
    out = []
    for p in scripts:
        found = _WRONG.search(p.read_text(errors="replace"))
        out.append(NearMiss(f"{NEAR_MISS_DIR}/{p.name}", found.group(1).strip() if found else ""))
    return out


@dataclasses.dataclass(frozen=True)
class Mutant:
    """The reference's end state with mutant ``index`` applied (``KINDS`` of each file it wrote)."""

    task: Task
    index: int
    kind_paths: tuple[str, ...] = ()

    async def run(self, sandbox: Sandbox, instruction: str) -> AgentOutcome:
        roots = result_paths(self.task, sandbox.container.attrs["Config"].get("WorkingDir"), self.kind_paths)[0]
        if not roots:
            return AgentOutcome(exit_code=0, output=f"{MUTATED}0\tnone")
        snap = await sandbox.exec(changes.snap(roots), timeout=120, user=0)
        if snap.exit_code != 0:
            return AgentOutcome(exit_code=snap.exit_code, output=f"cannot hash the image's files: {snap.output[-300:]}")
        solved = await OracleAgent(self.task).run(sandbox, instruction)
        mutate = await sandbox.exec(f"{changes.changed(roots)} | python3 -c {shlex.quote(_MUTATE)} {self.index} "
                                    f"{shlex.quote(' '.join(KINDS))}", timeout=120, user=0)
        return AgentOutcome(exit_code=solved.exit_code or mutate.exit_code, timed_out=solved.timed_out or mutate.timed_out,
                            output=f"{solved.output[-2000:]}\n{MUTATED}{mutate.output.strip()}")


@dataclasses.dataclass(frozen=True)
class Tried:
    """One wrong solution's trial: what it was and what it earned."""

    what: str
    """``near_miss/x.sh (wrong: ...)`` or ``truncate /app/out.txt: kept the first 2 of 4 lines``."""
    reward: float

    @property
    def survived(self) -> bool:
        return self.reward >= 1.0


@dataclasses.dataclass(frozen=True)
class StrengthReport:
    ok: bool
    reason: Reason
    detail: str
    near_misses: tuple[Tried, ...] = ()
    mutants: tuple[Tried, ...] = ()
    trials: int = 0
    seconds: float = 0.0
    """Container wall time of its trials, summed (what the check cost)."""
    logs: str = ""
    """The verifier's output of the first wrong solution that scored 1 (the proposer's feedback)."""


def _mutation(result: TrialResult) -> tuple[int, str]:
    """How many mutants the reference's end state has, and the one this trial applied ("" for none)."""
    line = result.agent.output.split(MUTATED, 1)[-1].strip().splitlines()[-1:] or ["0\tnone"]
    count, _, rest = line[0].partition("\t")
    if not count.isdigit():
        raise TrialFault(f"mutant: no mutation reported: {result.agent.output[-300:]}")
    kind, _, rest = rest.partition("\t")
    path, _, what = rest.partition("\t")
    return int(count), "" if kind == "none" else f"{kind} {path}: {what}"


async def check_strength(task: Task, images: ImageCache, *, image: str | None = None, caps: LimitCaps | None = None,
                         labels: dict[str, str] | None = None, max_mutants: int = 9, concurrency: int = 2,
                         progress: Callable[[str], None] | None = None) -> StrengthReport:
    """Run ``task``'s near misses and up to ``max_mutants`` mutants of its reference's end state
    (the task must be valid: its reference scores 1). A trial whose reference or mutation did not
    finish is a fault (``TrialFault``), never a verdict."""
    say = progress or (lambda line: None)
    kind_paths = images.kinds.results(task)
    gate = asyncio.Semaphore(concurrency)
    ran: list[TrialResult] = []

    async def trial(agent) -> TrialResult:
        async with gate:
            result = await run_trial(task, agent, images, image=image, caps=caps, labels=labels)
        if result.agent.timed_out or (isinstance(agent, Mutant) and result.agent.exit_code != 0):
            raise TrialFault(f"{type(agent).__name__}: the reference or the mutation did not finish (exit "
                             f"{result.agent.exit_code}): {result.agent.output[-300:]}")
        ran.append(result)
        return result

    if not task.has_solution:  # an imported task: no reference end state to mutate, no near misses to run
        return StrengthReport(True, "ok", "no reference solution: not checked (the solver's attempts decide at calibration)")
    misses = near_misses(task)
    if unexplained := [m.script for m in misses if not m.wrong]:
        return StrengthReport(False, "near_miss_unexplained",
                              f"{', '.join(unexplained)} has no '# wrong: ...' line saying what it gets wrong")

    async def mutant(i: int) -> tuple[int, str, TrialResult]:
        result = await trial(Mutant(task, i, kind_paths))
        return (*_mutation(result), result)

    image = image or await images.build(task)
    first, *near_results = await asyncio.gather(mutant(0), *(trial(OracleAgent(task, script=m.script)) for m in misses))
    rest = await asyncio.gather(*(mutant(i) for i in range(1, min(first[0], max_mutants))))
    tried_near = tuple(Tried(f"{m.script} (wrong: {m.wrong})", r.reward) for m, r in zip(misses, near_results))
    found = [(what, r) for _, what, r in (first, *rest) if what]
    tried_mut = tuple(Tried(what, r.reward) for what, r in found)
    for t in (*tried_near, *tried_mut):
        say(f"{t.what}: reward {t.reward:g}")
    seconds = sum(r.seconds for r in ran)
    report = functools.partial(StrengthReport, near_misses=tried_near, mutants=tried_mut, trials=len(ran),
                               seconds=seconds)
    survived = [t for t in tried_near if t.survived]
    if survived:
        logs = next(r.log() for t, r in zip(tried_near, near_results) if t.survived)
        return report(False, "weak_tests", f"a near miss scored 1: {survived[0].what}; the tests must fail it", logs=logs)
    by_file: dict[str, dict[str, tuple[Tried, TrialResult]]] = {}
    for t, (what, r) in zip(tried_mut, found):
        kind, _, rest = what.partition(" ")
        by_file.setdefault(rest.partition(": ")[0], {})[kind] = (t, r)
    unread = [path for path, kinds in by_file.items() if all(t.survived for t, _ in kinds.values())]
    presence = [path for path, kinds in by_file.items() if path not in unread and len(kinds) == len(KINDS)
                and all(t.survived for k, (t, _) in kinds.items() if k != "drop")]
    killed = sum(not t.survived for t in tried_mut)
    summary = (f"{killed} of {len(tried_mut)} mutants of the reference's end state killed"
               + (f" ({len(unread)} files the tests do not need)" if unread else ""))
    checked = [path for path in by_file if path not in unread and path not in presence]
    if presence and not checked:
        t, r = by_file[presence[0]]["perturb"]
        return report(False, "weak_tests", f"{summary}: the tests need {', '.join(presence[:3])} to exist but not to be "
                      f"right, full reward with {t.what} and with {by_file[presence[0]]['truncate'][0].what}",
                      logs=r.log())
    others = [t.what for path, kinds in by_file.items() if path not in unread for t, _ in kinds.values() if t.survived]
    near_line = f", {len(tried_near)} near misses failed" if tried_near else ", no near misses shipped"
    return report(True, "ok", summary + near_line + (f"; survived: {'; '.join(others[:3])}" if others else ""))


class StrengthSettingsError(ValueError):
    """An ``AES_STRENGTH_*`` variable has a value of the wrong type."""


@dataclasses.dataclass(frozen=True)
class StrengthSettings:
    """How the verifier-strength gate tries wrong solutions (``AES_STRENGTH_<FIELD>``)."""

    env_prefix: ClassVar[str] = "AES_STRENGTH_"
    section: ClassVar[str] = "strength"
    enforce: bool = True
    """Whether ``weak_tests`` rejects the candidate (and sends it back with the surviving wrong
    solution); off: the verdict is recorded and the candidate goes on."""
    max_mutants: int = 9
    """Mutants of the reference's end state tried per candidate (three per file it wrote, in
    path order): each is one trial."""
    concurrency: int = 2
    """Trials of one candidate run at once."""

    @classmethod
    def from_env(cls) -> "StrengthSettings":
        return cls(**read_settings(cls, StrengthSettingsError))  # type: ignore[arg-type]
