"""Solver rollouts as the flywheel needs them: one attempt on one bundle, summarized.

``RolloutRunner`` is the boundary between the flywheel and the sandbox/agents:
the calibrator and the pool review call it, ``aes_lib.runners.trial_runner``
implements it with the real solver in a Docker sandbox.
"""

from __future__ import annotations

import re
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from aes_proto.messages import BlobRef
from aes_proto.records import RolloutOutcome

from aes_lib.bundle import Task
from aes_lib.bus import kv as kvs
from aes_lib.review.audit import Audit

_KEY_UNSAFE = re.compile(r"[^-_A-Za-z0-9]")


class RolloutRunner(Protocol):
    async def run(self, bundle: BlobRef, env_id: str, rollout_id: str, hints: str | None = None,
                  imported: bool = False) -> RolloutOutcome:
        """Run the current solver once on the task in ``bundle``; ``hints`` extend the
        instruction (the diagnostic attempt gets the reference solution); ``imported``: a task
        people wrote (a pool seed), sandboxed as imported tasks are (``LimitCaps.allow_network``)."""

    async def reference_solution(self, bundle: BlobRef) -> str:
        """The task's ``solution/solve.sh``, used as hints."""

    def task(self, bundle: BlobRef) -> AbstractAsyncContextManager[Task]:
        """The bundle's files, held while the caller uses them (the audit reads them)."""


def kv_key(rollout_id: str) -> str:
    """A rollout id as a KV key (KV keys allow only ``[-_=./A-Za-z0-9]``)."""
    return "r." + _KEY_UNSAFE.sub("_", rollout_id)


async def cached(kv, rollout_id: str, run) -> RolloutOutcome:
    """``run()`` once per ``rollout_id``: a redelivered message reuses a finished attempt (one
    recorded before outcomes carried their summary, without a rollout id, runs again). Two
    deliveries can run at once (redelivered while the first still ran, e.g. on a starved
    replica): the first outcome recorded is the one both return, so both publish the same."""
    key = kv_key(rollout_id)
    if (done := await kvs.read(kv, key, RolloutOutcome)) is not None and done.rollout_id:
        return done
    outcome = await run()
    return await kvs.update(kv, key, RolloutOutcome, lambda old: old if old is not None and old.rollout_id else outcome)


async def cached_audit(kv, key: str, run) -> Audit:
    """``run()`` once per ``key``, as rollouts are (``cached``): a redelivery reuses the first audit
    recorded instead of asking the model again."""
    k = kv_key(key)
    if (done := await kvs.read(kv, k, Audit)) is not None:
        return done
    audit = await run()
    return await kvs.update(kv, k, Audit, lambda old: old or audit)
