"""Generation modes compared the paper's way: valid-environment rate (with a 95%
Wilson interval) and cost per valid environment, validity judged by the
validator's library function (image builds, oracle 1.0, empty solution < 0.5)."""

from __future__ import annotations

import asyncio
import math
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from aes_lib.agents.proposer.boundary import Resources, generate, generator
from aes_lib.agents.proposer.proposal import Proposal
from aes_lib.bundle import BundleError, unpack
from aes_lib.domains import Domain
from aes_lib.domains import get as get_domain
from aes_lib.flywheel.status import wilson
from aes_lib.models import usd
from aes_lib.sandbox import validate_task
from aes_proto.messages import Assignment, BlobRef, Lineage


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
        cpv = "n/a (none valid)" if not self.valid else usd(self.cost_per_valid, 6)
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(self.reasons.items()))
        return (f"| {self.mode} | {self.n} | {self.valid} | {self.rate:.2f} [{lo:.2f}, {hi:.2f}] | {usd(self.cost_usd, 6)} "
                f"| {cpv} | {self.prompt_tokens + self.completion_tokens} | {self.seconds / max(self.n, 1):.1f} | {reasons} |")


HEADER = ("| mode | n | valid | valid rate [95% Wilson] | cost | cost per valid env | tokens | s/episode | outcomes |\n"
          "|---|---|---|---|---|---|---|---|---|")


async def _outcome(p: Proposal, images, domain: Domain) -> str:
    """``ok`` or why not: the generator's failure, the validator's reason, or the domain gate's."""
    if p.packed is None:
        return p.failure
    with tempfile.TemporaryDirectory(prefix="aes-generate-judge-") as tmp:
        dest = Path(tmp) / "task"
        try:
            task = await asyncio.to_thread(unpack, p.packed.data, dest)
        except BundleError as e:
            return f"invalid_bundle:{type(e).__name__}"
        # feedback mode already validated exactly these files
        reason = p.report.reason if p.report is not None else (await validate_task(dest, images)).reason
        if reason != "ok" or (gate := domain.gate_class()) is None:
            return reason
        verdict = (await gate(images=images).check_task(task, images)).verdict
        return "ok" if verdict.ok else f"{domain.name}:{verdict.reason}"


async def run_mode(
    mode: str,
    n: int,
    resources: Resources,
    *,
    parent: tuple[str, BlobRef] | None = None,
    category: str = "",
    domain: str = "",
    progress: Callable[[str], None] | None = None,
) -> ModeStats:
    """``n`` generations in ``mode``, one after another (each is judged by the validator and,
    for a ``domain`` with a gate, by that gate);
    ``parent`` is an environment id and its bundle in ``resources.store``; ``progress``
    hears of each generation judged."""
    generator(mode)  # an unknown mode fails before any work
    solver = resources.solver_client
    stats = ModeStats(mode)
    for i in range(n):
        a = Assignment(idempotency_key=f"generate:{mode}:{i}:{uuid.uuid4().hex[:8]}", episode_id=uuid.uuid4().hex,
                       lineage=Lineage(assignment_id=uuid.uuid4().hex, parent_env_id=parent[0] if parent else None,
                                       category=category, domain=domain, mode=mode),  # type: ignore[arg-type]
                       direction="harder" if parent else "new", parent_bundle=parent[1] if parent else None)
        solver_cost_before = solver.usage.cost_usd if solver else 0.0
        t0 = time.monotonic()
        p = await generate(a, resources)
        outcome = await _outcome(p, resources.images, get_domain(domain))
        stats.seconds += time.monotonic() - t0
        stats.n += 1
        stats.valid += outcome == "ok"
        stats.reasons[outcome] = stats.reasons.get(outcome, 0) + 1
        traj = p.trajectory
        stats.cost_usd += traj.cost_usd + ((solver.usage.cost_usd - solver_cost_before) if solver else 0.0)
        stats.prompt_tokens += traj.prompt_tokens
        stats.completion_tokens += traj.completion_tokens
        if progress:
            progress(f"{mode} {i + 1}/{n}: {outcome}")
    return stats
