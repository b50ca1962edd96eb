"""Weight sync: every engine that serves a policy loads each version the learner publishes.

Consumes ``PolicyVersion``; for each engine serving that policy (the solver's
endpoint, and the proposer's when it is another one) it asks the engine to load the
checkpoint, then publishes ``ServingUpdate`` with the load time. Engines ignore a
version that is not newer, so redeliveries and replicas are harmless. On start it
pushes the latest published version, so a restarted engine catches up.
"""

from __future__ import annotations

import logging

from aes_proto import subjects
from aes_proto.messages import PolicyVersion, ServingUpdate

from aes_lib.models.weights import engine_client
from aes_lib.service import Context, Service

log = logging.getLogger(__name__)


def engine_urls(settings, policy: str) -> list[str]:
    """Endpoints that serve ``policy``: with the shared policy the solver's and (if another)
    the proposer's; with separate models, that role's own."""
    solver = settings.model_url
    proposer = settings.proposer_model_url or solver
    urls = {"shared": [solver, proposer], "solver": [solver], "proposer": [proposer]}[policy]
    return sorted({u for u in urls if u})


class WeightSyncService(Service[PolicyVersion]):
    name = "weight-sync"
    subject = subjects.POLICY_VERSION
    message_type = PolicyVersion
    ack_wait = 300.0

    async def setup(self, ctx: Context) -> None:
        engine_client(ctx.settings.engine, "")  # refuses an engine that cannot take weights, at start
        history = getattr(ctx, "history", None)  # the bus has one; a test's bare context may not
        if history is not None:
            latest: dict[str, PolicyVersion] = {}
            for pv in await history(subjects.POLICY_VERSION, PolicyVersion):
                if pv.policy not in latest or pv.version > latest[pv.policy].version:
                    latest[pv.policy] = pv
            for pv in latest.values():
                await self.handle(pv, ctx)

    async def handle(self, msg: PolicyVersion, ctx: Context) -> None:
        for url in engine_urls(ctx.settings, msg.policy):
            result = await engine_client(ctx.settings.engine, url).load(msg)
            if not result.loaded:
                continue
            log.info("weights loaded", extra={"engine": url, "policy": msg.policy, "version": result.version,
                                              "seconds": result.seconds})
            await ctx.publish(subjects.SERVING_VERSION, ServingUpdate(
                idempotency_key=f"serving:{url}:{msg.policy}:{msg.version}", episode_id=msg.episode_id,
                policy=msg.policy, version=result.version, engine=url, seconds=result.seconds))
