"""The solver's system prompt: its role and the agent protocol's instructions.

Apart from ``solver`` (which brings the sandbox, the bus and the model client) so that what
needs only the prompt -- the bootstrap policy's supervised start, bench/gpu_pools_experiment.py
on a lent GPU without msgspec -- shows the model exactly the solver's words.
"""

from __future__ import annotations

from aes_lib.agents.protocol import AgentProtocol, FencedProtocol

_ROLE = "You are an expert at the Linux command line, working inside a container to complete a task."


def system_prompt(protocol: AgentProtocol) -> str:
    """The solver's system prompt under ``protocol``."""
    return f"{_ROLE}\n{protocol.instructions}"


SYSTEM_PROMPT = system_prompt(FencedProtocol())
"""The solver's system prompt under the default (fenced) protocol."""
