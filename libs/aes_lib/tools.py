"""Harness-side tools: what one returns, and the handler the agent loop calls.

Below the agents and the domains, as both speak it: a domain's ``ToolSession`` (ask_human's
question tool) and the proposer's ``aes-tool`` return a ``ToolResult``; the loop runs them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ToolResult:
    """Outcome of a harness-side tool the model invoked."""

    exit_code: int
    output: str
    submitted: bool = False
    """Ends the episode (the proposer's ``aes-tool submit``)."""


ToolHandler = Callable[[str], Awaitable[ToolResult | None]]
"""Given a command, runs it outside the container and returns a result, or None if it is no tool."""
