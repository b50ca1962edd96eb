"""Admission of an ask-human task: its registry holds, the instruction really withholds
each detail, and the tests depend on each one -- the oracle with a blocker's ``value``
swapped for its ``decoy`` must lose reward (else asking would be pointless)."""

from __future__ import annotations

import asyncio
import re
import shutil
import tempfile
from pathlib import Path

from aes_proto.messages import Verdict

from aes_lib.bundle import Task
from aes_lib.domains.gate import DomainGate, DomainReport
from aes_lib.sandbox import ImageCache, OracleAgent, run_trial
from aes_lib.sandbox.trial import TrialResult

from aes_domains.ask_human.blockers import SOLVE, Blocker, BlockerRegistryError, load_blockers
from aes_domains.ask_human.hil import UnknownSettingError, setting_of

MIN_BLOCKERS = 2
DECOY_CONCURRENCY = 3
"""Decoy oracle trials at once (each is two containers)."""


def _mentions(text: str, literal: str) -> bool:
    """``literal`` occurs in ``text`` as a whole token (not inside a longer word or number)."""
    return re.search(rf"(?<![\w.]){re.escape(literal)}(?![\w])", text) is not None


def with_decoy(task: Task, blocker: Blocker, dest: Path) -> Task:
    """A copy of ``task`` at ``dest`` whose solve.sh uses ``blocker``'s decoy."""
    shutil.copytree(task.root, dest, symlinks=True)
    solve = dest / SOLVE
    solve.write_text(solve.read_text(encoding="utf-8").replace(blocker.value, blocker.decoy), encoding="utf-8")
    return Task.load(dest)


class AskHumanGate(DomainGate):
    stage = "ask-human"

    def check(self, task: Task) -> Verdict | None:
        try:
            setting = setting_of(task.config.metadata)
            blockers = load_blockers(task.root)
        except (BlockerRegistryError, UnknownSettingError) as e:
            return self.verdict(False, "bad_blockers", str(e))
        if len(blockers) < MIN_BLOCKERS:
            return self.verdict(False, "too_few_blockers",
                                f"{len(blockers)} blocker(s); an ask-human task withholds at least {MIN_BLOCKERS}")
        if setting != "full_info":  # full_info states every detail on purpose
            told = [b.id for b in blockers if _mentions(task.instruction, b.value)]
            if told:
                return self.verdict(False, "detail_not_withheld",
                                    f"instruction.md states the value of: {', '.join(told)}")
        return None

    async def check_task(self, task: Task, images: ImageCache | None = None,
                         labels: dict[str, str] | None = None) -> DomainReport:
        report = await super().check_task(task, images, labels)
        if not report.verdict.ok:
            return report
        images = images or self.images
        assert images is not None
        image = await images.build(task)
        blockers = load_blockers(task.root)
        gate = asyncio.Semaphore(DECOY_CONCURRENCY)

        async def decoy_trial(b: Blocker) -> TrialResult:
            async with gate:
                with tempfile.TemporaryDirectory(prefix="aes-decoy-") as tmp:
                    copy = await asyncio.to_thread(with_decoy, task, b, Path(tmp) / "task")
                    return await run_trial(copy, OracleAgent(copy), images, image=image, caps=self.caps,
                                           labels=labels)

        results = await asyncio.gather(*(decoy_trial(b) for b in blockers))
        crashed = [(b, r) for b, r in zip(blockers, results) if r.agent.exit_code != 0]
        if crashed:
            return DomainReport(self.verdict(
                False, "decoy_breaks_solution",
                f"solve.sh fails outright with the decoy of: {', '.join(b.id for b, _ in crashed)}; a decoy must "
                "be a plausible wrong guess the tests catch, not a crash"), _logs(crashed))
        untested = [(b, r) for b, r in zip(blockers, results) if r.reward >= 1.0]
        if untested:
            return DomainReport(self.verdict(
                False, "detail_not_tested",
                f"the oracle still scores 1.0 with the decoy of: {', '.join(b.id for b, _ in untested)}; the tests "
                "must fail when that detail is guessed wrong"), _logs(untested))
        rewards = ", ".join(f"{b.id} {r.reward:g}" for b, r in zip(blockers, results))
        return DomainReport(self.verdict(True, "ok", f"nop earns 0; decoy rewards: {rewards}"))


def _logs(pairs: list[tuple[Blocker, TrialResult]]) -> str:
    return "\n".join(f"=== decoy of {b.id}: {b.value!r} -> {b.decoy!r}\n{r.log()}" for b, r in pairs)
