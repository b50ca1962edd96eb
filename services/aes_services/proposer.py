"""Proposer service: an Assignment in, a CandidateEnv (or a recorded failure) out.

``Assignment.lineage.mode`` picks the generator (``aes_lib.agents.proposer.boundary``):
``agent`` (the harness: a terminal agent in its own container with
build/check/solver/submit tools), ``prompt`` or ``feedback`` (the baselines). A
candidate goes to the first admission stage with the configured route; an
episode that submits nothing publishes a
``CalibrationResult(decision="rejected", proposer_reward=0)`` so the planner and
pool see the outcome. The proposer's endpoint and model default to the solver's.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from pathlib import Path

from aes_lib.admission import check_live_route
from aes_lib.bus import kv as kvs
from aes_lib.agents.proposer.baselines import BaselineLimits
from aes_lib.agents.proposer.boundary import Resources, generate
from aes_lib.agents.proposer.workspace import WORKSPACE_ROLLOUTS
from aes_lib.agents.proposer.candidate import (
    candidate_env,
    no_candidate,
    publish_candidate,
    publish_failure,
    store_bundle,
)
from aes_lib.agents.proposer.harness import EpisodeBudget
from aes_lib.config import env_overrides
from aes_lib.models import ChatClient, chat_client
from aes_lib.sandbox import ImageCache
from aes_lib.service import Context, Service
from aes_proto import subjects
from aes_proto.messages import Assignment
from aes_proto.records import HISTORY_BUCKET, EnvHistory, RolloutRecord, history_key
from aes_services.registry import builtin_stages

_EPISODE = EpisodeBudget()
_BASELINE = BaselineLimits()


class ProposerEndpointError(ValueError):
    """No model endpoint is configured for the proposer (nor the solver)."""


@dataclass(frozen=True)
class ProposerConfig:
    """Proposer knobs, from ``AES_PROPOSER_*`` environment variables; each defaults to
    ``EpisodeBudget``'s or ``BaselineLimits``' value."""

    max_turns: int = _EPISODE.loop.max_turns
    """``AES_PROPOSER_MAX_TURNS``: model calls per agentic episode."""
    time_limit_s: float = _EPISODE.loop.time_limit_s
    """``AES_PROPOSER_TIME_LIMIT_S``: wall-clock budget of one agentic episode."""
    max_tokens: int = _EPISODE.loop.max_tokens
    """``AES_PROPOSER_MAX_TOKENS``: completion tokens per model call of an agentic episode."""
    max_revisions: int = _BASELINE.max_revisions
    """``AES_PROPOSER_MAX_REVISIONS``: feedback-mode revisions after the first attempt."""

    @classmethod
    def from_env(cls) -> "ProposerConfig":
        return cls(**env_overrides(cls, "AES_PROPOSER_", ValueError))

    def budget(self) -> EpisodeBudget:
        return _EPISODE.with_loop(max_turns=self.max_turns, time_limit_s=self.time_limit_s, max_tokens=self.max_tokens)

    def baseline(self) -> BaselineLimits:
        return replace(_BASELINE, max_revisions=self.max_revisions)


def proposer_client(settings) -> ChatClient:
    if not settings.endpoint("proposer")[0]:
        raise ProposerEndpointError("AES_PROPOSER_MODEL_URL and AES_MODEL_URL are empty (aes up sets AES_MODEL_URL)")
    return chat_client(settings, "proposer")


class ProposerService(Service[Assignment]):
    name = "proposer"
    subject = subjects.ASSIGNMENT
    message_type = Assignment
    ack_wait = 120.0
    budget = 7200.0
    """An agentic episode may take ``AES_PROPOSER_TIME_LIMIT_S`` (1800 s) per proposal."""
    max_deliver = 3

    async def setup(self, ctx: Context) -> None:
        # Candidates follow AES_ROUTE: refuse to start on one that would strand them.
        await check_live_route(ctx.js, ctx.settings.route_stages, builtin_stages())
        config = ProposerConfig.from_env()

        async def rollouts(env_id: str) -> list[RolloutRecord]:
            h = await kvs.read(await ctx.kv(HISTORY_BUCKET), history_key(env_id), EnvHistory)
            return list(h.recent[-WORKSPACE_ROLLOUTS:]) if h else []

        self.resources = Resources(
            client=proposer_client(ctx.settings),
            store=ctx.blobs,
            images=ImageCache(),
            state_file=Path(ctx.settings.home) / "proposer" / "state.tar.gz",
            solver_client=chat_client(ctx.settings) if ctx.settings.model_url else None,
            budget=config.budget(),
            baseline=config.baseline(),
            rollouts=rollouts,
        )

    async def handle(self, msg: Assignment, ctx: Context) -> None:
        p = await generate(msg, self.resources)
        traj = p.trajectory
        if p.packed is None:
            detail = f"{traj.stop_reason}; {len(traj.turns)} turns" + (f"; {traj.error}" if traj.error else "")
            await publish_failure(ctx, no_candidate(msg, p.failure, detail, cost_usd=traj.cost_usd,
                                                    trajectory=p.trajectory_ref))
            return
        bundle = await asyncio.to_thread(store_bundle, ctx.blobs, p.packed)
        await publish_candidate(ctx, candidate_env(
            msg, p.packed, bundle, ctx.settings.route_stages, model=self.resources.client.model,
            cost_usd=traj.cost_usd, prompt_tokens=traj.prompt_tokens, completion_tokens=traj.completion_tokens,
            trajectory=p.trajectory_ref,
        ))
