"""The domains as the sandbox's ``TaskKinds``: pass ``DomainKinds()`` to every ``ImageCache``."""

from __future__ import annotations

from pathlib import Path

from aes_lib.bundle import Task
from aes_lib.domains.base import UnknownDomainError
from aes_lib.domains.registry import by_image, domain_of
from aes_lib.sandbox.kinds import UnknownKindError


class DomainKinds:
    """``TaskKinds`` from the domain registry: a domain's image recipe, startup command and result paths."""

    def recipe(self, image: str) -> Path | None:
        domain = by_image(image)
        return domain.image_dir if domain is not None else None

    def startup(self, task: Task) -> str | None:
        try:
            return domain_of(task).startup
        except UnknownDomainError as e:
            raise UnknownKindError(str(e)) from e

    def results(self, task: Task) -> tuple[str, ...]:
        try:
            return domain_of(task).results
        except UnknownDomainError as e:
            raise UnknownKindError(str(e)) from e
