"""Operations on closed intervals given as (start, end) tuples with start <= end."""


def merge(intervals):
    """Return the union of ``intervals`` as a sorted list of disjoint intervals.

    Intervals that overlap or touch (one ends where the next starts) are merged.
    The input may be in any order and is not modified.
    """
    merged = []
    for start, end in intervals:
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def total_length(intervals):
    """Total length covered by ``intervals``, counting overlapping parts once."""
    return sum(end - start for start, end in merge(intervals))


def gaps(intervals, lo, hi):
    """Sub-intervals of [lo, hi] not covered by ``intervals``, sorted.

    Only the parts inside [lo, hi] are returned; a gap is never empty.
    """
    result = []
    cursor = lo
    for start, end in merge(intervals):
        if start > cursor:
            result.append((cursor, start))
        cursor = max(cursor, end)
    if cursor < hi:
        result.append((cursor, hi))
    return result
