"""Per-environment index of recent solver rollouts, in a JetStream KV bucket.

The proposer's workspace shows the solver's latest attempts on the parent
environment; the blob store cannot list keys, so each rollout's trajectory ref is
appended (compare-and-set) to a bounded list under the environment's key.
"""

from __future__ import annotations

import msgspec
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError

from aes_proto.messages import BlobRef

BUCKET = "aes_env_rollouts"
KEEP = 16
"""Rollouts kept per environment (the newest)."""
_CAS_ATTEMPTS = 20


class HistoryContentionError(RuntimeError):
    """The index changed under every one of the update attempts."""


class RolloutEntry(msgspec.Struct, kw_only=True, frozen=True):
    rollout_id: str
    solver: str
    """Model name of the solver that made the attempt."""
    reward: float
    trajectory: BlobRef
    failure: str = ""


class _Entries(msgspec.Struct):
    items: list[RolloutEntry] = []


async def record(kv, env_id: str, entry: RolloutEntry, keep: int = KEEP) -> None:
    for _ in range(_CAS_ATTEMPTS):
        try:
            current = await kv.get(env_id)
            items, rev = msgspec.msgpack.decode(current.value, type=_Entries).items, current.revision
        except KeyNotFoundError:
            items, rev = [], 0
        if any(e.rollout_id == entry.rollout_id for e in items):
            return  # redelivered: already recorded
        data = msgspec.msgpack.encode(_Entries((items + [entry])[-keep:]))
        try:
            if rev == 0:
                await kv.create(env_id, data)
            else:
                await kv.update(env_id, data, last=rev)
            return
        except KeyWrongLastSequenceError:
            continue
    raise HistoryContentionError(f"rollout index of {env_id} changed {_CAS_ATTEMPTS} times during one update")


async def entries(kv, env_id: str) -> list[RolloutEntry]:
    try:
        e = await kv.get(env_id)
    except KeyNotFoundError:
        return []
    return msgspec.msgpack.decode(e.value, type=_Entries).items
