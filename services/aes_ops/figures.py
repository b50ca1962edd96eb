"""Plots for the HTML pages ``aes`` writes: matplotlib on Agg, embedded as base64 PNG, so a page
is one self-contained file."""

from __future__ import annotations

import base64
import functools
import html
import io


@functools.cache
def pyplot():
    """pyplot on the Agg backend, imported on the first plot: every ``aes`` command imports the
    modules that plot, and matplotlib costs a second (more in a fresh container, which builds its
    font cache)."""
    import matplotlib

    matplotlib.use("Agg")  # no display; must precede pyplot
    import matplotlib.pyplot as plt

    return plt


def png(fig, dpi: int = 90) -> bytes:
    """``fig`` as PNG bytes; the figure is closed."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    pyplot().close(fig)
    return buf.getvalue()


def img(title: str, data: bytes) -> str:
    """An ``<img>`` carrying the PNG ``data`` itself."""
    return f'<img alt="{html.escape(title)}" src="data:image/png;base64,{base64.b64encode(data).decode()}">'


def page(title: str, body: str) -> str:
    """A whole HTML document around ``body`` (already HTML)."""
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}td,th{padding:.2em .8em}</style>"
            f"</head><body><h1>{html.escape(title)}</h1>{body}</body></html>")
