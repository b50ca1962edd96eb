"""Which families exist: the built-ins, and any package that declares an ``aes.families`` entry
point (``name = "module:attribute"``, the attribute a ``Family`` instance). Plug-ins load on first use."""

from __future__ import annotations

import functools
from importlib.metadata import EntryPoint, entry_points

from aes_lib.families.base import Family, UnknownFamilyError
from aes_lib.families.builtin import BUILTIN

ENTRY_POINT_GROUP = "aes.families"


@functools.cache
def _registered() -> dict[str, Family | EntryPoint]:
    found: dict[str, Family | EntryPoint] = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return {**found, **{f.name: f for f in BUILTIN}}  # a plug-in cannot replace a built-in


def names() -> list[str]:
    """Every registered family: the built-ins in their order, then plug-ins by name."""
    builtin = [f.name for f in BUILTIN]
    return builtin + sorted(n for n in _registered() if n not in builtin)


@functools.cache
def get(name: str) -> Family:
    """The family called ``name``; ``UnknownFamilyError`` naming the known ones if none is."""
    found = _registered().get(name)
    if found is None:
        raise UnknownFamilyError(f"unknown task family {name!r} (known: {', '.join(names())})")
    family = found.load() if isinstance(found, EntryPoint) else found
    if not isinstance(family, Family) or family.name != name:
        raise UnknownFamilyError(f"entry point {name!r} ({getattr(found, 'value', found)}) is not a Family "
                                 f"named {name!r}: got {family!r}")
    return family
