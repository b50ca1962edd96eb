"""Windows are [k * width, (k + 1) * width) for every integer k, so they line up across
hosts and series no matter where a series starts."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _check_width(width: int) -> None:
    if not isinstance(width, int) or isinstance(width, bool) or width <= 0:
        raise ValueError(f"width must be a positive integer, got {width!r}")


def parse_width(text: str) -> int:
    """'90s', '5m', '2h', '1d' or a bare number of seconds -> seconds."""
    m = re.fullmatch(r"\s*(\d+)\s*([smhd]?)\s*", text)
    if not m or int(m.group(1)) == 0:
        raise ValueError(f"not a window width: {text!r}")
    return int(m.group(1)) * UNITS[m.group(2) or "s"]


def bucket_start(ts: int, width: int) -> int:
    """Start of the window that holds ``ts``."""
    _check_width(width)
    return int(ts / width) * width


def bucket_range(start: int, end: int, width: int) -> list[int]:
    """Starts of every window that overlaps [start, end), in order."""
    _check_width(width)
    if end <= start:
        return []
    return list(range(bucket_start(start, width), bucket_start(end - 1, width) + 1, width))


def group_events(events: Iterable[tuple[int, T]], width: int) -> dict[int, list[T]]:
    """Events (timestamp, value) by window start, windows in order, values in input order."""
    groups: dict[int, list[T]] = {}
    for ts, value in events:
        groups.setdefault(bucket_start(ts, width), []).append(value)
    return dict(sorted(groups.items()))


def rollup(events: Iterable[tuple[int, float]], width: int) -> list[tuple[int, int, float]]:
    """(window start, count, sum) for every window from the first event's to the last's,
    empty windows included."""
    groups = group_events(events, width)
    if not groups:
        return []
    starts = bucket_range(min(groups), max(groups) + 1, width)
    return [(s, len(groups.get(s, [])), float(sum(groups.get(s, [])))) for s in starts]
