"""Solver rollouts as the flywheel needs them: one attempt on one bundle, summarized.

``RolloutRunner`` is the boundary between the flywheel and the sandbox/agents:
the calibrator and the pool review call it, ``aes_lib.flywheel.runners.trial_runner``
implements it with the real solver in a Docker sandbox.
"""

from __future__ import annotations

import asyncio
import re
from typing import Protocol

import msgspec

from aes_proto.messages import BlobRef
from aes_proto.records import RolloutOutcome

from aes_lib.agents.solver import Rollout, publish_rollout
from aes_lib.bus import kv as kvs
from aes_lib.agents.trajectory import load_trajectory

_KEY_UNSAFE = re.compile(r"[^-_A-Za-z0-9]")


class RolloutRunner(Protocol):
    async def run(self, bundle: BlobRef, env_id: str, rollout_id: str, hints: str | None = None,
                  imported: bool = False) -> RolloutOutcome:
        """Run the current solver once on the task in ``bundle``; ``hints`` extend the
        instruction (the diagnostic attempt gets the reference solution); ``imported``: a task
        people wrote (a pool seed), sandboxed as imported tasks are (``LimitCaps.allow_network``)."""

    async def reference_solution(self, bundle: BlobRef) -> str:
        """The task's ``solution/solve.sh``, used as hints."""


def kv_key(rollout_id: str) -> str:
    """A rollout id as a KV key (KV keys allow only ``[-_=./A-Za-z0-9]``)."""
    return "r." + _KEY_UNSAFE.sub("_", rollout_id)


async def cached(kv, rollout_id: str, run) -> RolloutOutcome:
    """``run()`` once per ``rollout_id``: a redelivered message reuses a finished attempt."""
    key = kv_key(rollout_id)
    if (done := await kvs.read(kv, key, RolloutOutcome)) is not None:
        return done
    outcome = await run()
    await kv.put(key, msgspec.msgpack.encode(outcome))
    return outcome


async def announce(ctx, out: RolloutOutcome, *, episode_id: str, group_id: str, purpose: str,
                   group_size: int = 0) -> None:
    """Publish a (possibly cached) attempt like every solver rollout: summary, the
    environment's rollout index, and for training a trajectory ref for the learner. Keys
    derive from the rollout id, so announcing again after a crash publishes nothing new."""
    traj = await asyncio.to_thread(load_trajectory, ctx.blobs, out.trajectory)
    await publish_rollout(ctx, Rollout(traj, out.trajectory), episode_id=episode_id, group_id=group_id,
                          purpose=purpose, group_size=group_size)
