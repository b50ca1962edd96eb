"""``Version``: MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD], ordered by precedence; build
metadata never takes part in precedence or equality."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterable

_VERSION = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
)


class InvalidVersion(ValueError):
    """Text that is not a semantic version."""


@functools.total_ordering
@dataclasses.dataclass(frozen=True, eq=False)
class Version:
    major: int
    minor: int
    patch: int
    prerelease: tuple[int | str, ...] = ()
    """Dot-separated identifiers; numeric ones as ints."""
    build: str = ""

    @classmethod
    def parse(cls, text: str) -> "Version":
        m = _VERSION.fullmatch(text.strip())
        if not m:
            raise InvalidVersion(f"not a semantic version: {text!r}")
        pre = tuple(int(p) if p.isdigit() else p for p in m.group(4).split(".")) if m.group(4) else ()
        return cls(int(m.group(1)), int(m.group(2)), int(m.group(3)), pre, m.group(5) or "")

    @property
    def is_prerelease(self) -> bool:
        return bool(self.prerelease)

    def _key(self) -> tuple:
        return (self.major, self.minor, self.patch, ".".join(map(str, self.prerelease)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other: "Version") -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + ".".join(map(str, self.prerelease))
        return text + (f"+{self.build}" if self.build else "")


def _v(v: str | Version) -> Version:
    return v if isinstance(v, Version) else Version.parse(v)


def compare(a: str | Version, b: str | Version) -> int:
    """-1, 0 or 1 as ``a`` has lower, equal or higher precedence than ``b``."""
    va, vb = _v(a), _v(b)
    return (va > vb) - (va < vb)


def sort_versions(versions: Iterable[str]) -> list[str]:
    """``versions`` by ascending precedence (equal ones keep their order)."""
    return sorted(versions, key=Version.parse)


def latest(versions: Iterable[str], include_prerelease: bool = False) -> str | None:
    """The version of highest precedence (pre-releases only with ``include_prerelease``);
    None when there is none."""
    candidates = [v for v in versions if include_prerelease or not Version.parse(v).is_prerelease]
    return max(candidates, key=Version.parse, default=None)
