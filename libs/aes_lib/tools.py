"""Harness-side tools: what one returns, and the handler the agent loop calls.

Below the agents and the domains, as both speak it: a domain's ``ToolSession`` (ask_human's
question tool) and the proposer's ``aes-tool`` return a ``ToolResult``; the loop runs them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ToolResult:
    """Outcome of a harness-side tool the model invoked."""

    exit_code: int
    output: str
    submitted: bool = False
    """Ends the episode (the proposer's ``aes-tool submit``)."""


AGENT_PROTOCOLS: tuple[str, ...] = ("fenced", "tools")
"""How an agent acts (``aes_lib.agents.protocol``): a fenced shell command per reply, or native tool calls."""


ToolHandler = Callable[[str], Awaitable[ToolResult | None]]
"""Given a command, runs it outside the container and returns a result, or None if it is no tool."""


@dataclass(frozen=True)
class ToolSpec:
    """A harness tool as a native tool call offers it (an OpenAI ``tools`` entry). A call becomes
    the command line it stands for, which the ``ToolHandler`` serves like a typed one, so both
    protocols reach a tool through one path."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    """JSON Schema of the arguments: an object of typed properties, every one required and no
    others (OpenAI's ``strict`` form: a property that may be left out has a ``null`` type too)."""
    command: Callable[[Mapping[str, Any]], str]
    """The command line a call with these (checked) arguments stands for."""

    def definition(self) -> dict[str, Any]:
        # strict: the engine holds the arguments to the schema (vLLM pins them in its grammar).
        return {"type": "function", "function": {"name": self.name, "description": self.description, "strict": True,
                                                 "parameters": {**self.parameters, "additionalProperties": False}}}
