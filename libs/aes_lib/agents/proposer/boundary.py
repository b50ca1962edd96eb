"""The proposer's one boundary: ``generate(assignment, resources) -> Proposal``.

``GENERATORS`` registers the generation modes by name: ``prompt`` and ``feedback``
(the baselines, ``baselines.py``), ``agent`` (the harness, ``harness.py``),
``procedural`` (a task family's next instance, no model: ``procedural.py``) and
``parametric`` (the same, its difficulty chosen by one model call: ``parametric.py``). Every
list of modes (flywheel config, ``aes generate``, the mode comparison) is ``MODES``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from aes_lib.agents.proposer import baselines, parametric, procedural
from aes_lib.agents.proposer.baselines import BaselineLimits
from aes_lib.agents.proposer.harness import EpisodeBudget, run_episode
from aes_lib.agents.proposer.proposal import Proposal
from aes_lib.agents.proposer.workspace import PastEnvironment
from aes_lib.models import ChatClient
from aes_lib.sandbox import ImageCache
from aes_proto.messages import Assignment, ProposerMode
from aes_proto.records import RolloutRecord

if TYPE_CHECKING:
    from aes_lib.blobstore import BlobStore

Rollouts = Callable[[str], Awaitable[list[RolloutRecord]]]
"""An environment's latest solver attempts (its ``EnvHistory``), by env id."""


@dataclass(frozen=True)
class Resources:
    """What the modes generate with; each reads the fields it needs."""

    client: ChatClient
    """The proposer's model."""
    store: BlobStore
    """Blob store: the parent bundle comes from it, the trajectory goes to it."""
    images: ImageCache
    """``ImageCache`` for building and validating tasks (``feedback``, ``agent``)."""
    state_file: Path
    """``agent``: memory/ and tools/ persisted across episodes."""
    solver_client: ChatClient | None = None
    """``agent``: the model behind ``aes-tool solver`` (None: the tool is unavailable)."""
    budget: EpisodeBudget = EpisodeBudget()
    """``agent``: turns, time and container of the episode."""
    baseline: BaselineLimits = BaselineLimits()
    """``prompt`` / ``feedback``: tokens and revisions; ``parametric``: the temperature."""
    rollouts: Rollouts | None = None
    """``agent``: the parent's solver attempts shown in the workspace (none when None)."""
    others: tuple[PastEnvironment, ...] = ()
    """``agent``: environments shown in past_environments/ besides the parent (e.g. those an
    ``aes generate`` run already wrote, which a "new" task must differ from)."""


class Generator(Protocol):
    """One generation mode: an assignment in, a proposal out."""

    async def __call__(self, assignment: Assignment, resources: Resources, /) -> Proposal: ...


async def _agent(a: Assignment, r: Resources) -> Proposal:
    past: list[PastEnvironment] = []
    if (parent := a.lineage.parent_env_id) and a.parent_bundle:
        rollouts = await r.rollouts(parent) if r.rollouts else []
        past = [PastEnvironment(parent, a.parent_bundle, rollouts)]
    past += [e for e in r.others if e.env_id != a.lineage.parent_env_id]
    return await run_episode(a, r.client, r.solver_client, r.images, r.store, past=past, state_file=r.state_file,
                             budget=r.budget)


def _baseline(mode: str) -> Generator:
    async def run(a: Assignment, r: Resources) -> Proposal:
        return await baselines.generate(a, r.client, r.store, mode=mode, images=r.images, limits=r.baseline)

    return run


async def _procedural(a: Assignment, r: Resources) -> Proposal:
    return await procedural.generate(a, r.store)


async def _parametric(a: Assignment, r: Resources) -> Proposal:
    return await parametric.generate(a, r.client, r.store, limits=r.baseline)


GENERATORS: dict[ProposerMode, Generator] = {"prompt": _baseline("prompt"), "feedback": _baseline("feedback"),
                                             "agent": _agent, procedural.MODE: _procedural,
                                             parametric.MODE: _parametric}
"""The generation modes (``aes_proto.messages.ProposerMode``) by name, in comparison order (the
Prompt baseline first)."""

MODES: tuple[str, ...] = tuple(GENERATORS)
"""Generation modes a planner may assign (``seed`` is for the bundled tasks only)."""


def generator(mode: str) -> Generator:
    """The generator registered as ``mode``; ValueError names the modes there are."""
    try:
        return GENERATORS[mode]
    except KeyError:
        raise ValueError(f"unknown generation mode {mode!r}: choose from {', '.join(MODES)}") from None


async def generate(assignment: Assignment, resources: Resources) -> Proposal:
    """``assignment.lineage.mode``'s generator on ``assignment``."""
    return await generator(assignment.lineage.mode)(assignment, resources)
