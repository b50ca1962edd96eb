"""Proposer service: an Assignment in, a CandidateEnv (or a recorded failure) out.

``Assignment.lineage.mode`` picks the generator (``aes_lib.agents.proposer.boundary``):
``agent`` (the harness: a terminal agent in its own container with
build/check/solver/submit tools), ``prompt`` or ``feedback`` (the baselines), ``procedural``
(a task family's next instance, no model call and no proposer sample) or ``parametric`` (the
same, its difficulty chosen by the proposer's model: a sample like the baselines'). A
candidate goes to the first admission stage with the configured route (its domain's gate
first, for a domain that has one); an
episode that submits nothing publishes a
``CalibrationResult(decision="rejected", proposer_reward=0)`` so the planner and
pool see the outcome. The proposer's endpoint and model default to the solver's.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from aes_lib.admission import check_live_route
from aes_lib.domains import UnknownDomainError
from aes_lib.domains import get as get_domain
from aes_lib.bus import kv as kvs
from aes_lib.agents.proposer import procedural
from aes_lib.agents.proposer.boundary import Resources, generate
from aes_lib.agents.proposer.config import ProposerConfig
from aes_lib.agents.solver import solver_limits
from aes_lib.agents.proposer.workspace import WORKSPACE_ROLLOUTS
from aes_lib.agents.proposer.candidate import (
    candidate_env,
    no_candidate,
    proposal,
    publish_candidate,
    publish_failure,
    store_bundle,
)
from aes_lib.models import ChatClient, chat_client
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import ImageCache
from aes_lib.service import Context, Service
from aes_proto import subjects
from aes_proto.messages import Assignment
from aes_proto.records import HISTORY_BUCKET, EnvHistory, RolloutRecord, history_key
from aes_services.registry import builtin_stages

log = logging.getLogger(__name__)


class ProposerEndpointError(ValueError):
    """No model endpoint is configured for the proposer (nor the solver)."""


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
            images=ImageCache(kinds=DomainKinds()),
            state_file=Path(ctx.settings.home) / "proposer" / "state.tar.gz",
            solver_client=chat_client(ctx.settings) if ctx.settings.model_url else None,
            budget=config.budget(solver=solver_limits()),
            baseline=config.baseline(),
            rollouts=rollouts,
        )

    async def handle(self, msg: Assignment, ctx: Context) -> None:
        try:
            domain = get_domain(msg.lineage.domain)
        except UnknownDomainError as e:  # the assignment's fault: no episode could answer it
            await publish_failure(ctx, no_candidate(msg, "unknown_domain", str(e)))
            return
        p = await generate(msg, self.resources)
        traj = p.trajectory
        # No policy wrote a procedural instance: no model to name, no proposer episode to train on.
        # Every other mode (parametric included) is a model's sample.
        by_model = msg.lineage.mode != procedural.MODE
        episode = proposal(msg, p.trajectory_ref, traj) if by_model else None
        facts = {"assignment_id": msg.lineage.assignment_id, "revision": msg.lineage.revision, "mode": msg.lineage.mode,
                 "turns": len(traj.turns), "stop_reason": traj.stop_reason, "cost_usd": traj.cost_usd}
        if p.packed is None:
            detail = f"{traj.stop_reason}; {len(traj.turns)} turns" + (f"; {traj.error}" if traj.error else "")
            log.info("proposal failed", extra={"failure": p.failure, "error": traj.error, **facts})
            await publish_failure(ctx, no_candidate(msg, p.failure, detail, cost_usd=traj.cost_usd,
                                                    episode=episode))
            return
        log.info("proposal produced", extra={"env_id": p.packed.sha256, **facts})
        bundle = await asyncio.to_thread(store_bundle, ctx.blobs, p.packed)
        await publish_candidate(ctx, candidate_env(
            msg, p.packed, bundle, domain.route(ctx.settings.route_stages),
            model=self.resources.client.model if by_model else procedural.MODEL,
            cost_usd=traj.cost_usd, prompt_tokens=traj.prompt_tokens, completion_tokens=traj.completion_tokens,
            episode=episode,
        ))
