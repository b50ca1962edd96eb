"""``Domain``: what makes a kind of environment different from a plain terminal task.

A domain is a package of its own (this project's: ``libs/aes_domains/<name>/``) that
declares, in one ``DOMAIN`` object, everything the rest of the system asks about it, and
registers it under the ``aes.domains`` entry point group (``aes_lib.domains.registry``)::

    <package>/
    ├── __init__.py      DOMAIN = Domain(name=..., ...)
    ├── gate.py          its admission gate (a ``DomainGate``; route name = ``name``)
    ├── proposer.md      how to write such a task, for the proposer (our words)
    ├── image/           optional: Dockerfile (+ files) of ``aes-<name>:latest``, built
    │                    on aes-base the first time a task says ``FROM aes-<name>:latest``
    ├── template/        optional: files laid over the proposer's task template
    └── seeds/<task>/    hand-written Harbor tasks of the domain

A task names its domain in ``task.toml`` (``[metadata] domain = "<name>"``; none is
``terminal``), so it stays a plain Harbor task.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from aes_lib.bundle import Task
    from aes_lib.models import ChatClient
    from aes_lib.tools import ToolResult, ToolSpec

IMAGE_PREFIX = "aes-"
"""A domain's image is ``aes-<name>:latest``."""


class UnknownDomainError(ValueError):
    """A task or command names a domain nothing registers."""


class ToolSession(Protocol):
    """Harness-side solver tools for one attempt (they run outside the container, so they
    can hold what the solver must not read, e.g. ask_human's answers)."""

    prompt: str
    """What the solver's system prompt adds to describe the tools."""
    specs: "tuple[ToolSpec, ...]"
    """The tools as native tool calls offer them (``agents.protocol``: the ``tools`` protocol);
    each call becomes a command line that ``__call__`` serves."""

    async def __call__(self, command: str) -> "ToolResult | None":
        """Run ``command`` if it is one of the tools; None lets the shell run it."""

    def metrics(self) -> dict[str, float]:
        """What the attempt's use of the tools measured, recorded with its trajectory."""


@dataclasses.dataclass(frozen=True)
class Domain:
    """One kind of environment, as the validator, solver, proposer and stack see it."""

    name: str
    """Route name of the domain's gate and the value of ``[metadata] domain``."""
    title: str
    """Human name, as in the paper's Table 8 (``Software engineering``)."""
    root: Path
    """The domain's package folder (image/, template/, seeds/, proposer.md)."""
    gate: str | None = None
    """``module:Class`` of its admission gate; None: the common stages judge it alone."""
    solver_prompt: str = ""
    """What the solver's system prompt adds: the in-container tools the image provides."""
    startup: str | None = None
    """A command run as root in each agent container before the agent's turn (it starts the
    task's services and returns once they answer); a non-zero exit fails the trial."""
    results: tuple[str, ...] = ()
    """Where its tasks' results live besides the working directory (the state its services
    save): these paths cross to the verifier's container as data (``aes_lib.sandbox.verifier``)."""
    tools: Callable[["Task", "ChatClient"], ToolSession | None] | None = None
    """Harness-side solver tools for an attempt at ``task`` (the client is the solver's, for a judge)."""
    shaped: Callable[[float, Mapping[str, float]], float | None] | None = None
    """The reward the learner trains on, from the task's reward and the attempt's metrics
    (ask_human: Ask-F1 mixed in); None from it, or no function, trains on the task's reward."""
    seeds_dir: Path | None = None
    """Where its seed tasks are; default ``root/seeds``."""
    settings: tuple[tuple[str, type], ...] = ()
    """(heading, class) of the settings classes it adds to the run's configuration
    (``aes_lib.runconfig``): each class's ``section`` is its table in the config file."""

    @property
    def image_dir(self) -> Path | None:
        """The build context of ``image``, if the domain has an image of its own."""
        d = self.root / "image"
        return d if (d / "Dockerfile").is_file() else None

    @property
    def image(self) -> str | None:
        """``aes-<name>:latest`` when the domain has an image recipe."""
        return f"{IMAGE_PREFIX}{self.name}:latest" if self.image_dir else None

    @property
    def seeds(self) -> list[Path]:
        """Its seed task folders, sorted by name."""
        d = self.seeds_dir or self.root / "seeds"
        return sorted(p for p in d.iterdir() if (p / "task.toml").is_file()) if d.is_dir() else []

    @property
    def proposer_guide(self) -> str:
        """How to write a task of this domain (empty: the general instructions suffice)."""
        p = self.root / "proposer.md"
        return p.read_text() if p.is_file() else ""

    @property
    def template_dir(self) -> Path | None:
        """Files laid over the proposer's task template for this domain."""
        d = self.root / "template"
        return d if d.is_dir() else None

    def gate_class(self) -> type | None:
        """The class ``gate`` names (imported now), or None."""
        if not self.gate:
            return None
        module, _, name = self.gate.partition(":")
        return getattr(importlib.import_module(module), name)

    def route(self, base: tuple[str, ...]) -> tuple[str, ...]:
        """The admission route of a candidate of this domain: its gate first (cheap static
        checks and the domain's rules), then the common stages."""
        return (self.name, *base) if self.gate and self.name not in base else base
