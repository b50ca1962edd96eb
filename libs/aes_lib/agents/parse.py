"""Reading one action out of a model reply: a fenced shell command or the done marker."""

from __future__ import annotations

import re
from dataclasses import dataclass

DONE_MARKER = "TASK_DONE"
"""Reply with this (alone, or as ``echo TASK_DONE``) to end the episode."""

_FENCE = re.compile(r"```(?:bash|sh|shell|console)?[ \t]*\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class Action:
    """What a reply asks for: exactly one of ``command``, ``done`` or ``error``."""

    command: str = ""
    done: bool = False
    error: str = ""
    """Why the reply is not an action (sent back to the model as a format error)."""


FORMAT_HELP = (
    "Reply with exactly one shell command inside a fenced block:\n```bash\n<command>\n```\n"
    f"or, when the task is finished, reply with {DONE_MARKER}."
)


def parse_action(reply: str) -> Action:
    blocks = [b.strip() for b in _FENCE.findall(reply)]
    blocks = [b for b in blocks if b]
    if blocks:
        cmd = blocks[0]
        if cmd in (DONE_MARKER, f"echo {DONE_MARKER}"):
            return Action(done=True)
        if len(blocks) > 1:
            return Action(error=f"Found {len(blocks)} command blocks; send one at a time.\n{FORMAT_HELP}")
        return Action(command=cmd)
    if DONE_MARKER in reply:
        return Action(done=True)
    return Action(error=f"No command found in your reply.\n{FORMAT_HELP}")
