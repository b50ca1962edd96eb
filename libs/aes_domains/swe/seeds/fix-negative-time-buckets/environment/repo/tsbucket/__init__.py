"""Fixed-width, epoch-aligned time windows."""

from tsbucket.windows import bucket_range, bucket_start, group_events, parse_width, rollup

__all__ = ["bucket_range", "bucket_start", "group_events", "parse_width", "rollup"]
__version__ = "0.4.1"
