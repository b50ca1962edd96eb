"""Parametric task families: code that writes a complete Harbor task from a difficulty and a seed.

A family (``base.Family``) turns ``Params(difficulty, seed)`` into a task's text; ``render``
writes it as a task directory (the shape of ``seeds/``: managed verifier, reference solution,
``FROM aes-base:latest``) and records the family and its parameters in ``[metadata.family]``,
so a pool environment's parameters can be read back from its bundle. ``registry`` finds
families by name (built-ins and ``aes.families`` entry points); ``moves`` maps the planner's
easier/harder onto the difficulty. The procedural proposer mode instantiates them.
"""

from aes_lib.families.base import (
    Family, FamilyError, FamilyParamsError, Instance, NotAFamilyInstanceError, Params, TaskSpec, UnknownFamilyError,
)
from aes_lib.families.moves import moved
from aes_lib.families.registry import get, names
from aes_lib.families.render import instance_of, read_instance, write_instance

__all__ = [
    "Family", "FamilyError", "FamilyParamsError", "Instance", "NotAFamilyInstanceError", "Params", "TaskSpec",
    "UnknownFamilyError", "get", "instance_of", "moved", "names", "read_instance", "write_instance",
]
