"""An episode's limits (``LoopLimits``), apart from the loop so that what needs only a prompt
stating them (``solver_prompt``) imports neither msgspec nor the model client."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class LoopLimits:
    """Budgets of one episode."""

    max_turns: int = 20
    """Model calls, format errors included."""
    time_limit_s: float = 600.0
    """Wall-clock budget of the whole loop; checked before each model call."""
    command_timeout_s: float = 60.0
    """Per command run in the container."""
    max_output_chars: int = 1500
    """Output returned to the model per command (head and tail kept)."""
    max_tokens: int = 384
    """Completion tokens per model call."""
    temperature: float = 0.7
    seed: int | None = None
    """Sampling seed of the first model call (the n-th asks for seed + n), for an episode that
    must repeat exactly on the same policy (``aes eval --seed``); None: the engine's randomness."""
    history_turns: int = 6
    """Past exchanges re-sent to the model (the task itself always is); 0: all of them, as far
    as ``context_tokens`` allows. A small model's profile keeps a few; the trajectory records
    everything either way."""
    context_tokens: int = 0
    """The model's context window: the history re-sent is cut to fit it with ``max_tokens`` to
    spare (the oldest observations shortened first, then the oldest exchanges dropped; the task
    and the last exchange stay whole). 0: no cut but ``history_turns``."""
    protocol: str = "fenced"
    """How the model acts (``aes_lib.tools.AGENT_PROTOCOLS``): ``fenced`` shell commands or native ``tools`` calls."""
    tool_choice: str = "auto"
    """Under ``tools``: ``auto``, ``required`` (the engine makes every reply a call) or a tool's name
    (every reply calls it); see ``protocol.TOOL_CHOICES``."""

    def within(self, seconds: float) -> LoopLimits:
        """These limits for a task whose trial cuts the agent at ``seconds``: the loop (and so the
        prompt) keeps to the shorter time."""
        return replace(self, time_limit_s=min(self.time_limit_s, seconds))

    def prompt(self) -> str:
        """Every limit that can cut the episode, as a system prompt states them: a model should
        not learn them by running into them."""
        history = (f"the last {self.history_turns} exchanges are re-sent to you each turn" if self.history_turns
                   else "the whole conversation is re-sent to you each turn")
        if self.context_tokens:
            history += f", cut to a {self.context_tokens}-token context (older output shortened first)"
        return (f"{self.max_turns} replies and {self.time_limit_s:g} s in all; a reply of at most {self.max_tokens} "
                f"tokens; commands time out after {self.command_timeout_s:g} s and show at most "
                f"{self.max_output_chars} characters of output; {history}, so keep notes in files.")


def cut_notice(max_tokens: int, advice: str) -> str:
    """What a model whose reply the engine cut at the token cap is told (``finish_reason``
    ``length``): the cap lost its work, not a mistake of format, and ``advice`` says what to send."""
    return f"Your reply was cut at {max_tokens} tokens, the most a reply may have, before it was complete. {advice}"
