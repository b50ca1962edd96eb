"""What commands print besides their result: progress on stderr, ``--json`` on stdout.

Progress is a rich bar when stderr is a terminal and one plain line per step otherwise,
so logs and CI stay readable; ``aes --progress bar`` or ``plain`` forces either.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import TypeVar

import msgspec
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as Bars
from rich.table import Table
from rich.text import Text

T = TypeVar("T")
MODES = ("auto", "bar", "plain")
"""``aes --progress`` values."""
PLAIN_TRACK_LINES = 10
"""Lines a tracked sequence prints in plain mode, however long it is."""

_mode = "auto"


def set_mode(mode: str) -> None:
    """One of ``MODES``, for the rest of the process (``main`` sets it from ``--progress``)."""
    global _mode
    _mode = mode


def print_json(obj: object) -> None:
    """``obj`` (structs, dataclasses, builtins) as one JSON document on stdout."""
    sys.stdout.write(msgspec.json.encode(obj).decode() + "\n")
    sys.stdout.flush()


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """``rows`` under ``header`` as aligned columns: a borderless rich table, one line per row
    however wide (scripts and tests split its lines on whitespace), trailing blanks stripped."""
    grid = Table(*header, box=None, pad_edge=False)
    for row in rows:
        grid.add_row(*(Text(cell) for cell in row))  # Text: a task's name or an error is no markup
    console = Console(width=100_000, record=True, file=io.StringIO())
    console.print(grid)
    return "\n".join(line.rstrip() for line in console.export_text().splitlines())


def _bars() -> bool:
    return _mode == "bar" or (_mode == "auto" and sys.stderr.isatty())


class Progress:
    """The steps of one command: ``with Progress("validate", total=6) as p: p.step("built")``.

    ``step`` is also the ``progress`` callback library functions take (one line per step).
    """

    def __init__(self, title: str, total: int | None = None) -> None:
        self.title = title
        self.total = total
        self.done = 0
        self._bars: Bars | None = None

    def __enter__(self) -> "Progress":
        if _bars():
            self._bars = Bars(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                              TimeElapsedColumn(), console=Console(stderr=True, force_terminal=True),
                              redirect_stdout=False)  # stdout is the result's, never the bar's
            self._task = self._bars.add_task(self.title, total=self.total)
            self._bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bars is not None:
            self._bars.stop()  # before an error line, so it is not drawn over

    def step(self, line: str, advance: int = 1, *, plain: bool = True) -> None:
        """``advance`` steps done (0: just say what is happening now), ``line`` says which;
        ``plain=False`` updates a bar but prints no plain line."""
        self.done += advance
        if self._bars is not None:
            self._bars.update(self._task, advance=advance, total=self.total, description=f"{self.title}: {line}")
        elif plain:
            count = f"{self.done}/{self.total}" if self.total else str(self.done)
            print(f"[{self.title} {count}] {line}", file=sys.stderr, flush=True)

    def track(self, items: Sequence[T], what: str) -> Iterator[T]:
        """``items`` one by one, each a step of ``what`` (added to the total); plain mode
        prints about ``PLAIN_TRACK_LINES`` lines for the whole sequence."""
        self.total = (self.total or 0) + len(items)
        every = -(-len(items) // PLAIN_TRACK_LINES)  # rounded up
        for i, item in enumerate(items, 1):
            yield item
            self.step(what, plain=i % every == 0 or i == len(items))
