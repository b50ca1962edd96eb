"""Closed integer intervals [start, end]."""

from intervals.core import gaps, merge, total_length

__all__ = ["gaps", "merge", "total_length"]
