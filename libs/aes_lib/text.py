"""Shortening text for a prompt: the agent loop's command output, a revision's evidence."""

from __future__ import annotations


def truncate(text: str, limit: int) -> str:
    """Keep head and tail of long output; the middle of a log is rarely what matters."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit} characters elided ...]\n{text[-tail:]}"
