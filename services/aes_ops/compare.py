"""Generation modes compared the paper's way: valid-environment rate (with a 95%
Wilson interval) and cost per valid environment, validity judged by the
validator's library function (image builds, oracle 1.0, empty solution < 0.5)."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from aes_lib.agents.proposer.boundary import MODES, Resources, generate, generator
from aes_lib.agents.proposer.config import ProposerConfig
from aes_lib.agents.proposer.harness import EpisodeBudget
from aes_lib.agents.solver import solver_limits
from aes_lib.agents.proposer.proposal import Proposal
from aes_lib.agents.proposer.workspace import PastEnvironment
from aes_lib.blobstore import open_store
from aes_lib.bundle import BundleError, pack, unpack
from aes_lib.config import Settings
from aes_lib.domains import TERMINAL, Domain
from aes_lib.domains import get as get_domain
from aes_lib.flywheel.status import wilson
from aes_lib.models import chat_client, usd
from aes_lib.models.serve import endpoint
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import ImageCache, validate_task
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


SHOWN = 4
"""Earlier valid tasks of the run shown to each agent-mode episode (the latest ones)."""

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
    for a ``domain`` with a gate, by that gate; an agent episode finds the run's earlier valid
    tasks in past_environments/, so a "new" task is asked to differ from them);
    ``parent`` is an environment id and its bundle in ``resources.store``; ``progress``
    hears of each generation judged."""
    generator(mode)  # an unknown mode fails before any work
    solver = resources.solver_client
    stats = ModeStats(mode)
    written: list[PastEnvironment] = []  # this run's valid tasks: later episodes see them, not a blank slate
    for i in range(n):
        a = Assignment(idempotency_key=f"generate:{mode}:{i}:{uuid.uuid4().hex[:8]}", episode_id=uuid.uuid4().hex,
                       lineage=Lineage(assignment_id=uuid.uuid4().hex, parent_env_id=parent[0] if parent else None,
                                       category=category, domain=domain, mode=mode),  # type: ignore[arg-type]
                       direction="harder" if parent else "new", parent_bundle=parent[1] if parent else None)
        solver_cost_before = solver.usage.cost_usd if solver else 0.0
        t0 = time.monotonic()
        p = await generate(a, dataclasses.replace(resources, others=tuple(written[-SHOWN:])))
        outcome = await _outcome(p, resources.images, get_domain(domain))
        if outcome == "ok" and p.packed is not None:
            ref = await asyncio.to_thread(resources.store.put_content, "bundles", p.packed.data, ".tar.gz")
            written.append(PastEnvironment(p.packed.sha256, ref))
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


@dataclass(frozen=True)
class Comparison:
    """What ``aes generate`` compares."""

    modes: Sequence[str] = MODES
    n: int = 4
    """Generations per mode."""
    parent: Path | None = None
    """A task directory to build variants of; None: the domain's default (``default_parent``)."""
    category: str = ""
    domain: str = TERMINAL
    max_turns: int = EpisodeBudget().loop.max_turns
    """Agent mode: turns per episode."""
    model_url: str = ""
    """OpenAI-compatible endpoint; empty: the proposer's configured one, else the local model."""
    model: str = ""


def default_parent(domain: str) -> Path | None:
    """A domain task's default parent: the domain's first seed (none for terminal tasks, which
    the proposer can write from the general instructions alone)."""
    found = get_domain(domain)
    return found.seeds[0] if domain != TERMINAL and found.seeds else None


async def compare(settings: Settings, plan: Comparison, *, ready: Callable[[], None] | None = None,
                  done: Callable[[ModeStats], None] | None = None,
                  progress: Callable[[str], None] | None = None) -> list[ModeStats]:
    """``plan.n`` generations per mode, mode after mode, against the configured (or local)
    model; ``ready`` hears when the endpoint answered and the parent is stored, ``done`` each
    mode's stats as it ends, ``progress`` each generation judged."""
    default_url, default_model, _ = settings.endpoint("proposer")
    model = plan.model or default_model
    with endpoint(plan.model_url or default_url, settings.home) as url:
        async with chat_client(settings, "proposer", url=url, model=model) as client, \
                chat_client(settings, url=url, model=model) as solver:
            for c in (client, solver):  # each role's key, before Docker or any episode
                await c.probe()
            store = open_store(settings.blob_location, settings)
            parent = None
            if parent_dir := plan.parent or default_parent(plan.domain):
                packed = pack(parent_dir)
                parent = (packed.sha256, store.put_content("bundles", packed.data, suffix=".tar.gz"))
            config = ProposerConfig.from_env()  # the settings and the model profile in force
            budget = config.budget(solver=solver_limits()).with_loop(max_turns=plan.max_turns)
            images = ImageCache(kinds=DomainKinds())
            if ready:
                ready()
            stats = []
            for mode in plan.modes:
                resources = Resources(client, store, images, settings.home / "proposer" / "generate-state.tar.gz",
                                      solver_client=solver, budget=budget, baseline=config.baseline())
                stats.append(await run_mode(mode, plan.n, resources, parent=parent, category=plan.category,
                                            domain=plan.domain, progress=progress))
                if done:
                    done(stats[-1])
    return stats
