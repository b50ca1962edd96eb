"""Which domains exist: terminal, and every installed package that declares an ``aes.domains``
entry point (``name = "module"``, the module holding ``DOMAIN``). This project's own domains
(``aes_domains``) register the same way, in its ``pyproject.toml``, so the library names none
of them. Modules load on first use."""

from __future__ import annotations

import functools
import importlib
from importlib.metadata import entry_points

from aes_lib.domains.base import IMAGE_PREFIX, Domain, UnknownDomainError

TERMINAL = "terminal"
TERMINAL_MODULE = "aes_lib.domains.terminal"
ENTRY_POINT_GROUP = "aes.domains"
UNREGISTERED = "a domain is an installed package's aes.domains entry point: make install after a pull that adds one"


@functools.cache
def _modules() -> dict[str, str]:
    found: dict[str, str] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == TERMINAL:
            raise UnknownDomainError(f"{ep.value}: {TERMINAL!r} is the default domain; a package cannot replace it")
        if found.setdefault(ep.name, ep.value) != ep.value:
            raise UnknownDomainError(f"two packages register the domain {ep.name!r}: {found[ep.name]} and {ep.value}")
    return {TERMINAL: TERMINAL_MODULE, **found}


def names() -> list[str]:
    """Every registered domain, terminal first."""
    return [TERMINAL, *sorted(n for n in _modules() if n != TERMINAL)]


@functools.cache
def get(name: str) -> Domain:
    """The domain called ``name`` (empty: terminal); ``UnknownDomainError`` if none is."""
    name = name or TERMINAL
    module = _modules().get(name)
    if module is None:
        raise UnknownDomainError(f"unknown domain {name!r} (known: {', '.join(names())}; {UNREGISTERED})")
    domain = importlib.import_module(module).DOMAIN
    if domain.name != name:
        raise UnknownDomainError(f"{module}.DOMAIN is named {domain.name!r}, registered as {name!r}")
    return domain


def domain_name(metadata: dict | None) -> str:
    """The domain a task's ``[metadata]`` names (``terminal`` when it names none)."""
    value = (metadata or {}).get("domain", TERMINAL)
    if not isinstance(value, str) or not value:
        raise UnknownDomainError(f"[metadata] domain must be a domain's name, got {value!r}")
    return value


def domain_of(task) -> Domain:
    """The domain of an ``aes_lib.bundle.Task``; ``UnknownDomainError`` for one not registered."""
    return get(domain_name(task.config.metadata))


def by_image(image: str) -> Domain | None:
    """The domain whose image ``image`` names (``aes-<name>:latest``), if any; only that
    domain's module is loaded."""
    name = image.removeprefix(IMAGE_PREFIX).removesuffix(":latest")
    if not image.startswith(IMAGE_PREFIX) or not image.endswith(":latest") or name not in _modules():
        return None
    domain = get(name)
    return domain if domain.image == image else None
