"""The argument types a method may declare, shared by the service and the client so both
reject the same values with the same words."""

from __future__ import annotations

import json
import typing

SCALARS = {"int": int, "float": float, "str": str, "bool": bool}


class ArgumentError(ValueError):
    """An argument that does not fit its method's signature."""


class TypeSpec:
    """A declared type by name: ``int``, ``float``, ``str``, ``bool`` or ``list[<scalar>]``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.item = name[5:-1] if name.startswith("list[") and name.endswith("]") else None
        if (self.item or name) not in SCALARS:
            raise TypeError(f"unsupported argument type {name!r} (use int, float, str, bool or list[...] of them)")

    @classmethod
    def of(cls, annotation: object) -> "TypeSpec":
        """The spec of a Python annotation (``int``, ``list[str]``...)."""
        if typing.get_origin(annotation) is list:
            (item,) = typing.get_args(annotation)
            return cls(f"list[{item.__name__}]")
        return cls(getattr(annotation, "__name__", str(annotation)))

    def check(self, where: str, value: object) -> None:
        """Raise ``ArgumentError`` unless ``value`` (decoded JSON) has this type; no coercion."""
        if self.item is None:
            if not _is(value, self.name):
                raise ArgumentError(f"{where} must be {self.name}, got {_describe(value)}")
            return
        if not isinstance(value, list):
            raise ArgumentError(f"{where} must be {self.name} (a JSON array), got {_describe(value)}")
        for i, v in enumerate(value):
            if not _is(v, self.item):
                raise ArgumentError(f"{where}[{i}] must be {self.item}, got {_describe(v)}")

    def parse(self, where: str, text: str) -> object:
        """A ``key=value`` word's value as this type (the shell gives only strings)."""
        if self.name == "str":
            return text
        try:
            value = json.loads(text)
        except ValueError:
            raise ArgumentError(f"{where} must be {self.name}, got {text!r}") from None
        if self.name == "float" and _is(value, "int"):
            value = float(value)
        self.check(where, value)
        return value


def _is(value: object, name: str) -> bool:
    if name == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if name == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, SCALARS[name])


def _describe(value: object) -> str:
    kind = {dict: "object", list: "array", type(None): "null"}.get(type(value), type(value).__name__)
    return f"{kind} {json.dumps(value)[:60]}"
