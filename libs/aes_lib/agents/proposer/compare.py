"""Generation modes compared the paper's way: valid-environment rate (with a 95%
Wilson interval) and cost per valid environment, validity judged by the
validator's library function (image builds, oracle 1.0, empty solution < 0.5)."""

from __future__ import annotations

import asyncio
import math
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from aes_lib.agents.proposer.baselines import BaselineLimits, generate
from aes_lib.agents.proposer.harness import EpisodeBudget, run_episode
from aes_lib.agents.proposer.workspace import PastEnvironment
from aes_lib.bundle import BundleError, PackedBundle, unpack
from aes_lib.flywheel.status import wilson
from aes_lib.models import ChatClient
from aes_lib.sandbox import validate_task
from aes_proto.messages import Assignment, BlobRef

MODES = ("prompt", "feedback", "agent")


@dataclass
class ModeStats:
    mode: str
    n: int = 0
    valid: int = 0
    cost_usd: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    reasons: dict[str, int] = field(default_factory=dict)
    """Outcome counts: ``ok`` or the validator's / generator's failure reason."""

    @property
    def rate(self) -> float:
        return self.valid / self.n if self.n else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.valid, self.n)

    @property
    def cost_per_valid(self) -> float:
        return self.cost_usd / self.valid if self.valid else math.inf

    def row(self) -> str:
        lo, hi = self.interval
        cpv = "n/a (none valid)" if not self.valid else f"${self.cost_per_valid:.6f}"
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(self.reasons.items()))
        return (f"| {self.mode} | {self.n} | {self.valid} | {self.rate:.2f} [{lo:.2f}, {hi:.2f}] | ${self.cost_usd:.6f} "
                f"| {cpv} | {self.prompt_tokens + self.completion_tokens} | {self.seconds / max(self.n, 1):.1f} | {reasons} |")


HEADER = ("| mode | n | valid | valid rate [95% Wilson] | cost | cost per valid env | tokens | s/episode | outcomes |\n"
          "|---|---|---|---|---|---|---|---|---|")


async def _judge(packed: PackedBundle | None, failure: str, images, workdir: Path) -> str:
    if packed is None:
        return failure or "no_submission"
    dest = workdir / f"judge-{uuid.uuid4().hex[:8]}"
    try:
        await asyncio.to_thread(unpack, packed.data, dest)
    except BundleError as e:
        return f"invalid_bundle:{type(e).__name__}"
    return (await validate_task(dest, images)).reason


async def run_mode(
    mode: str,
    n: int,
    *,
    client: ChatClient,
    solver_client: ChatClient | None,
    images,
    store,
    parent: tuple[str, BlobRef] | None,
    state_file: Path,
    category: str = "",
    budget: EpisodeBudget = EpisodeBudget(),
    baseline: BaselineLimits = BaselineLimits(),
) -> ModeStats:
    """``n`` generations in ``mode``, one after another (each is judged by the validator)."""
    if mode not in MODES:
        raise ValueError(f"unknown generation mode {mode!r}: choose from {', '.join(MODES)}")
    stats = ModeStats(mode)
    for i in range(n):
        a = Assignment(idempotency_key=f"generate:{mode}:{i}:{uuid.uuid4().hex[:8]}", episode_id=uuid.uuid4().hex,
                       assignment_id=uuid.uuid4().hex, direction="harder" if parent else "new",
                       parent_env_id=parent[0] if parent else None, parent_bundle=parent[1] if parent else None,
                       category=category, mode=mode)  # type: ignore[arg-type]
        solver_cost_before = solver_client.usage.cost_usd if solver_client else 0.0
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f"aes-generate-{mode}-") as tmp:
            work = Path(tmp)
            report = None
            if mode == "agent":
                past = [PastEnvironment(parent[0], parent[1])] if parent else []
                ep = await run_episode(a, client, solver_client, images, store, past=past, state_file=state_file,
                                       budget=budget)
                traj, packed, failure = ep.trajectory, ep.submission.packed if ep.submission else None, "no_submission"
            else:
                parent_dir = None
                if parent:
                    parent_dir = work / "parent"
                    await asyncio.to_thread(unpack, store.get_bytes(parent[1]), parent_dir)
                gen = await generate(a, client, work, mode=mode, images=images, parent_dir=parent_dir, limits=baseline)
                traj, packed, failure, report = gen.trajectory, gen.packed, gen.failure, gen.report
            if report is not None and packed is not None:
                outcome = report.reason  # feedback mode already validated exactly these files
            else:
                outcome = await _judge(packed, failure, images, work)
        stats.seconds += time.monotonic() - t0
        stats.n += 1
        stats.valid += outcome == "ok"
        stats.reasons[outcome] = stats.reasons.get(outcome, 0) + 1
        stats.cost_usd += traj.cost_usd + ((solver_client.usage.cost_usd - solver_cost_before) if solver_client else 0.0)
        stats.prompt_tokens += traj.prompt_tokens
        stats.completion_tokens += traj.completion_tokens
    return stats
