"""The solver's system prompt: its role, the agent protocol's instructions and its episode's limits.

Apart from ``solver`` (which brings the sandbox, the bus and the model client) so that what
needs only the prompt -- the bootstrap policy's supervised start, bench/gpu_pools_experiment.py
on a lent GPU without msgspec -- shows the model exactly the solver's words.
"""

from __future__ import annotations

from aes_lib.agents.limits import LoopLimits
from aes_lib.agents.protocol import AgentProtocol, FencedProtocol

_ROLE = "You are an expert at the Linux command line, working inside a container to complete a task."


def system_prompt(protocol: AgentProtocol, limits: LoopLimits) -> str:
    """The solver's system prompt under ``protocol`` and ``limits`` (every one that can cut the attempt)."""
    return f"{_ROLE}\n{protocol.instructions}\nLimits: {limits.prompt()}"


def solver_messages(system: str, instruction: str, hints: str = "") -> list[dict[str, str]]:
    """The messages an attempt opens with: ``system`` (``system_prompt`` and any domain's additions)
    and the task. What trains a policy on the solver's prompt renders it here too, with the limits
    its attempts will run under (``LoopLimits.within`` the task's timeout)."""
    return [{"role": "system", "content": system},
            {"role": "user", "content": f"Task:\n{instruction.strip()}" + (f"\n\nHints:\n{hints}" if hints else "")}]


SYSTEM_PROMPT = system_prompt(FencedProtocol(), LoopLimits())
"""The solver's system prompt under the default (fenced) protocol and ``LoopLimits``' defaults."""
