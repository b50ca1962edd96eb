"""The parametric proposer's prompt and its answer format, apart from the mode itself.

``parametric`` brings the store, the bus messages and the model client; what needs only the words
-- the bootstrap policy's supervised start, bench/gpu_pools_experiment.py on a lent GPU without
msgspec -- imports this, so every one of them shows the model the same prompt.
"""

from __future__ import annotations

import re

from aes_lib import families

MAX_TOKENS = 16
"""The answer is a handful of tokens; a reply that runs longer is no answer (and no long wait)."""
SYSTEM_PROMPT = ("You choose the difficulty of the next training task for a solver. "
                 "Reply with one line and nothing else: difficulty: N")
_ANSWER = re.compile(r"difficulty:[ \t]*(\d+)")


class ParametricAnswerError(ValueError):
    """A reply that is not a difficulty the family accepts; ``failure`` names why."""

    def __init__(self, failure: str, detail: str) -> None:
        super().__init__(detail)
        self.failure = failure


def messages(family: families.Family, parent_difficulty: int, direction: str,
             pass_rate: float | None) -> list[dict[str, str]]:
    """The one prompt (the bootstrap policy is taught on exactly this)."""
    seen = "unknown" if pass_rate is None else f"{pass_rate:.2f}"
    user = (f"Family: {family.name} ({family.summary})\n"
            f"Difficulty range: {family.min_difficulty} to {family.max_difficulty}\n"
            f"Parent difficulty: {parent_difficulty}\nParent pass rate: {seen}\nDirection: {direction}")
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def answer(difficulty: int) -> str:
    """The reply that chooses ``difficulty``."""
    return f"difficulty: {difficulty}"


def parse(text: str, family: families.Family) -> int:
    """The difficulty ``text`` chooses; ``ParametricAnswerError`` when it is not one of the family's."""
    m = _ANSWER.fullmatch(text.strip())
    if m is None:
        raise ParametricAnswerError("no_difficulty", f"the reply is not 'difficulty: N': {text[:80]!r}")
    difficulty = int(m.group(1))
    if not family.min_difficulty <= difficulty <= family.max_difficulty:
        raise ParametricAnswerError("difficulty_out_of_range", f"difficulty {difficulty} is outside "
                                    f"{family.name}'s [{family.min_difficulty}, {family.max_difficulty}]")
    return difficulty
