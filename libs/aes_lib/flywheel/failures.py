"""Short failure signatures from verifier output, so that failures can be counted."""

from __future__ import annotations

import re

_PYTEST_FAILED = re.compile(r"^FAILED\s+(\S+?)(?:\s+-\s+(.*))?$", re.MULTILINE)
_ERROR_LINE = re.compile(r"^(?:E\s+)?(\w+(?:Error|Exception)\b.*)$", re.MULTILINE)
_MAX = 160
"""Characters kept: enough to name a test and its assertion, short enough to group by."""


def failure_signature(verifier_output: str, reward: float, timed_out: bool = False, error: str = "") -> str:
    """The first failing test (pytest's ``FAILED path::test - reason``), else the first
    exception line, else a generic label; empty for a full reward."""
    if timed_out:
        return "timeout"
    if error:
        return f"error: {error.strip().splitlines()[0][:_MAX]}" if error.strip() else "error"
    if reward >= 1.0:
        return ""
    m = _PYTEST_FAILED.search(verifier_output)
    if m:
        test = m.group(1).split("::")[-1]
        return (f"{test}: {m.group(2)}" if m.group(2) else test)[:_MAX]
    m = _ERROR_LINE.search(verifier_output)
    if m:
        return m.group(1).strip()[:_MAX]
    return "tests failed" if reward == 0.0 else "some tests failed"
