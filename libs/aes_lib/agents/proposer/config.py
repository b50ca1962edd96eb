"""Proposer settings, read from ``AES_PROPOSER_*`` variables."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from aes_lib.agents.loop import LoopLimits
from aes_lib.agents.proposer.baselines import BaselineLimits
from aes_lib.agents.proposer.harness import EpisodeBudget
from aes_lib.config import read_settings

_EPISODE = EpisodeBudget()
_BASELINE = BaselineLimits()


@dataclass(frozen=True)
class ProposerConfig:
    """Proposer knobs, from ``AES_PROPOSER_*`` environment variables; each defaults to
    ``EpisodeBudget``'s or ``BaselineLimits``' value."""

    env_prefix: ClassVar[str] = "AES_PROPOSER_"
    section: ClassVar[str] = "proposer"
    max_turns: int = _EPISODE.loop.max_turns
    """Model calls per agentic episode."""
    time_limit_s: float = _EPISODE.loop.time_limit_s
    """Wall-clock budget of one agentic episode."""
    max_tokens: int = _EPISODE.loop.max_tokens
    """Completion tokens per model call of an agentic episode."""
    history_turns: int = _EPISODE.loop.history_turns
    """Past exchanges re-sent each turn of an agentic episode; 0: all, as far as ``context_tokens`` allows."""
    context_tokens: int = _EPISODE.loop.context_tokens
    """The proposer model's context window: the history is cut to fit it."""
    max_revisions: int = _BASELINE.max_revisions
    """Feedback-mode revisions after the first attempt."""
    prompt_max_tokens: int = _BASELINE.max_tokens
    """Completion tokens of one Prompt / Prompt + Env Feedback generation (a small model that never
    stops runs to this cap: 30-60 s per 1,000 tokens for SmolLM2's GGUF server on 2 cores, 34 tokens/s
    idle in ``bench/results/training_bench.md``)."""
    temperature: float = _BASELINE.temperature
    """Sampling temperature of the Prompt / Prompt + Env Feedback and ``parametric`` calls."""

    @classmethod
    def from_env(cls) -> "ProposerConfig":
        return cls(**read_settings(cls))  # type: ignore[arg-type]

    def budget(self, solver: LoopLimits | None = None) -> EpisodeBudget:
        """The episode's budget; ``solver``: the limits of the attempts ``aes-tool solver`` runs
        (their turns and time stay the tool's own), whose protocol is the run's (one shared policy
        acts one way)."""
        budget = _EPISODE.with_loop(max_turns=self.max_turns, time_limit_s=self.time_limit_s,
                                    max_tokens=self.max_tokens, history_turns=self.history_turns,
                                    context_tokens=self.context_tokens)
        if solver is None:
            return budget
        budget = budget.with_loop(protocol=solver.protocol)
        own = budget.tools.solver_limits
        return replace(budget, tools=replace(budget.tools, solver_limits=replace(
            solver, max_turns=own.max_turns, time_limit_s=own.time_limit_s)))

    def baseline(self) -> BaselineLimits:
        return replace(_BASELINE, max_revisions=self.max_revisions, max_tokens=self.prompt_max_tokens,
                       temperature=self.temperature)
