"""Proposer service: an Assignment in, a CandidateEnv (or a recorded failure) out.

``Assignment.mode`` picks the generator: ``agent`` (the harness: a terminal agent
in its own container with build/check/solver/submit tools), ``prompt`` or
``feedback`` (the baselines). A candidate goes to the first admission stage with
the configured route; an episode that submits nothing publishes a
``CalibrationResult(decision="rejected", proposer_reward=0)`` so the planner and
pool see the outcome. The proposer's endpoint and model default to the solver's.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from aes_lib.admission import check_route, live_stages
from aes_lib.agents import history
from aes_lib.agents.proposer.baselines import BaselineLimits, generate
from aes_lib.agents.proposer.candidate import (
    candidate_env,
    no_candidate,
    publish_candidate,
    publish_failure,
    store_bundle,
)
from aes_lib.agents.proposer.harness import EpisodeBudget, run_episode
from aes_lib.agents.proposer.workspace import PastEnvironment
from aes_lib.agents.trajectory import store_trajectory
from aes_lib.bundle import unpack
from aes_lib.config import env_overrides
from aes_lib.models import ChatClient
from aes_lib.sandbox import ImageCache
from aes_lib.service import Context, Service
from aes_proto import subjects
from aes_proto.messages import Assignment
from aes_services.registry import builtin_stages


class ProposerEndpointError(ValueError):
    """No model endpoint is configured for the proposer (nor the solver)."""


@dataclass(frozen=True)
class ProposerConfig:
    """Proposer knobs, from ``AES_PROPOSER_*`` environment variables."""

    max_turns: int = 40
    """``AES_PROPOSER_MAX_TURNS``: model calls per agentic episode."""
    time_limit_s: float = 1800.0
    """``AES_PROPOSER_TIME_LIMIT_S``: wall-clock budget of one agentic episode."""
    max_tokens: int = 1024
    """``AES_PROPOSER_MAX_TOKENS``: completion tokens per model call of an agentic episode."""
    max_revisions: int = 2
    """``AES_PROPOSER_MAX_REVISIONS``: feedback-mode revisions after the first attempt."""

    @classmethod
    def from_env(cls) -> "ProposerConfig":
        return cls(**env_overrides(cls, "AES_PROPOSER_", ValueError))

    def budget(self) -> EpisodeBudget:
        base = EpisodeBudget()
        return replace(base, loop=replace(base.loop, max_turns=self.max_turns, time_limit_s=self.time_limit_s,
                                          max_tokens=self.max_tokens))


def proposer_client(settings) -> ChatClient:
    url = settings.proposer_model_url or settings.model_url
    if not url:
        raise ProposerEndpointError("AES_PROPOSER_MODEL_URL and AES_MODEL_URL are empty (aes up sets AES_MODEL_URL)")
    return ChatClient(url, settings.proposer_model or settings.model)


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
        check_route(ctx.settings.route_stages, {**await live_stages(ctx.js), **builtin_stages()})
        self.config = ProposerConfig.from_env()
        self.client = proposer_client(ctx.settings)
        self.solver_client = ChatClient(ctx.settings.model_url, ctx.settings.model) if ctx.settings.model_url else None
        self.images = ImageCache()
        self.state_file = Path(ctx.settings.home) / "proposer" / "state.tar.gz"

    async def _past(self, a: Assignment, ctx: Context) -> list[PastEnvironment]:
        if not (a.parent_env_id and a.parent_bundle):
            return []
        rollouts = await history.entries(await ctx.kv(history.BUCKET), a.parent_env_id)
        return [PastEnvironment(a.parent_env_id, a.parent_bundle, rollouts)]

    async def handle(self, msg: Assignment, ctx: Context) -> None:
        store = ctx.blobs
        with tempfile.TemporaryDirectory(prefix="aes-proposer-") as tmp:
            if msg.mode not in ("prompt", "feedback"):
                ep = await run_episode(msg, self.client, self.solver_client, self.images, store,
                                       past=await self._past(msg, ctx), state_file=self.state_file,
                                       budget=self.config.budget())
                traj, traj_ref = ep.trajectory, ep.trajectory_ref
                packed = ep.submission.packed if ep.submission else None
                reason = "no_submission"
            else:
                parent = None
                if msg.parent_bundle is not None:
                    parent = Path(tmp) / "parent"
                    await asyncio.to_thread(unpack, await asyncio.to_thread(store.get_bytes, msg.parent_bundle), parent)
                gen = await generate(msg, self.client, Path(tmp), mode=msg.mode, images=self.images, parent_dir=parent,
                                     limits=BaselineLimits(max_revisions=self.config.max_revisions))
                traj, packed, reason = gen.trajectory, gen.packed, gen.failure or "no_submission"
                traj_ref = await asyncio.to_thread(store_trajectory, store, traj)
        if packed is None:
            detail = f"{traj.stop_reason}; {len(traj.turns)} turns" + (f"; {traj.error}" if traj.error else "")
            await publish_failure(ctx, no_candidate(msg, reason, detail, cost_usd=traj.cost_usd, trajectory=traj_ref))
            return
        bundle = await asyncio.to_thread(store_bundle, store, packed)
        await publish_candidate(ctx, candidate_env(
            msg, packed, bundle, ctx.settings.route_stages, mode=msg.mode, model=self.client.model,
            cost_usd=traj.cost_usd, prompt_tokens=traj.prompt_tokens, completion_tokens=traj.completion_tokens,
            trajectory=traj_ref,
        ))
