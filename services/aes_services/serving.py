"""Weight sync: every engine that serves a policy loads each version the learner publishes.

Consumes ``PolicyVersion``; for each engine serving that policy (the solver's
endpoint, and the proposer's when it is another one) it asks the engine to load the
version where the message says it is (the filesystem transport's folder, read in place, or
the store's checkpoint, ``aes_lib.weights``), then publishes ``ServingUpdate`` with the load
time. An engine the trainer already pushed the version into (the nccl transport) is left as it is. Engines ignore a
version that is not newer, so redeliveries and replicas are harmless. On start it
pushes the latest published version, and then keeps checking what each engine serves:
an engine that died and was restarted (``vllm_serve`` restarts vLLM on the base
weights) is loaded with the newest version again. A checkpoint that is not a loadable
folder is refused before it reaches the engine (logged, acked: retrying cannot fix
its bytes); the engine keeps serving the version it had.
"""

from __future__ import annotations

import asyncio
import logging

from aes_proto import subjects
from aes_proto.messages import PolicyVersion, ServingUpdate

from aes_lib.checkpoints import CheckpointFolderError
from aes_lib.models.weights import EngineWeightsError, engine_client
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
    watch_s = 5.0
    """Seconds between checks that every engine still serves the newest version."""

    def __init__(self) -> None:
        self.latest: dict[str, PolicyVersion] = {}
        """Policy -> newest version handled (the one a restarted engine is brought back to)."""
        self._lock = asyncio.Lock()  # one load at a time: the watcher and handle share engines
        self._watcher: asyncio.Task | None = None

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
        self._watcher = asyncio.get_running_loop().create_task(self._watch(ctx))

    async def teardown(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()

    async def handle(self, msg: PolicyVersion, ctx: Context) -> None:
        if msg.policy not in self.latest or msg.version > self.latest[msg.policy].version:
            self.latest[msg.policy] = msg
        async with self._lock:
            for url in engine_urls(ctx.settings, msg.policy):
                await self._load(url, msg, ctx)

    async def _load(self, url: str, msg: PolicyVersion, ctx: Context) -> None:
        try:
            result = await engine_client(ctx.settings.engine, url, ctx.settings).load(msg)
        except CheckpointFolderError as e:
            log.error("weights refused", extra={"engine": url, "policy": msg.policy, "version": msg.version,
                                                "reason": str(e)})
            return
        if not result.loaded:
            return
        log.info("weights loaded", extra={"engine": url, "policy": msg.policy, "version": result.version,
                                          "seconds": result.seconds})
        await ctx.publish(subjects.SERVING_VERSION, ServingUpdate(
            idempotency_key=f"serving:{url}:{msg.policy}:{msg.version}", episode_id=msg.episode_id,
            policy=msg.policy, version=result.version, engine=url, seconds=result.seconds))

    async def _watch(self, ctx: Context) -> None:
        """Bring an engine that serves less than the newest version (it restarted) back to it."""
        while True:
            await asyncio.sleep(self.watch_s)
            for pv in list(self.latest.values()):
                for url in engine_urls(ctx.settings, pv.policy):
                    try:
                        if await engine_client(ctx.settings.engine, url).version() < pv.version:
                            log.warning("engine behind", extra={"engine": url, "version": pv.version})
                            async with self._lock:
                                await self._load(url, pv, ctx)
                    except EngineWeightsError:  # down or still starting: the next round retries
                        continue
                    except Exception:  # the watch outlives any one failure
                        log.exception("engine check failed", extra={"engine": url})
