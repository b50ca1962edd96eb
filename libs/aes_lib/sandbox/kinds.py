"""``TaskKinds``: what the sandbox asks of the kinds of task (the domains), which live above it.

The sandbox is the security boundary and loads no plug-in: whoever builds an ``ImageCache``
passes the kinds in (``aes_lib.domains.kinds.DomainKinds``, backed by the domain registry).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from aes_lib.bundle import Task


class UnknownKindError(ValueError):
    """A task names a kind (a domain) that nothing provides."""


class TaskKinds(Protocol):
    def recipe(self, image: str) -> Path | None:
        """The build folder (Dockerfile and files) of ``image`` when it is a base image shipped
        with the code (a trusted recipe, rebuilt when it changes); None for any other image."""

    def startup(self, task: "Task") -> str | None:
        """The command run as root in each agent container of ``task`` before the agent's turn
        (it brings the task's services up); None for none. ``UnknownKindError`` when the task
        names a kind nothing provides."""

    def results(self, task: "Task") -> tuple[str, ...]:
        """Paths that hold the results of ``task``'s kind besides its working directory and
        artifacts (e.g. a service's saved state): they cross to the verifier's container."""
