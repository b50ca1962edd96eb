"""``aes trajectories export``: every training attempt as one row of Parquet or JSON Lines,
for SFT, rejection sampling or another trainer (columns: docs/EXPORTS.md).

A training attempt is a ``TrajectoryRef`` on the bus (the samples the learner consumes, both
roles); its row joins the trajectory in the blob store and the environment's pool entry.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq

from aes_proto import subjects
from aes_proto.messages import TrajectoryRef
from aes_proto.records import PoolEntry
from aes_proto.trajectory import Trajectory

from aes_lib.agents.trajectory import load_trajectory
from aes_lib.bus import Bus
from aes_lib.runners.pool_store import BUCKET, PoolStore

Format = Literal["parquet", "jsonl"]
FILES: dict[str, str] = {"parquet": "trajectories.parquet", "jsonl": "trajectories.jsonl"}

_TURN = pa.struct([
    ("reply", pa.string()),
    ("prompt_token_ids", pa.list_(pa.int64())),
    ("completion_token_ids", pa.list_(pa.int64())),
    ("completion_logprobs", pa.list_(pa.float64())),
    ("temperature", pa.float64()),
    ("policy_version", pa.int64()),
])
SCHEMA = pa.schema([
    ("rollout_id", pa.string()),
    ("role", pa.string()),
    ("env_id", pa.string()),
    ("group_id", pa.string()),
    ("group_size", pa.int64()),
    ("wave_id", pa.string()),
    ("policy_version", pa.int64()),
    ("reward", pa.float64()),
    ("task_reward", pa.float64()),
    ("metrics", pa.string()),
    ("model", pa.string()),
    ("stop_reason", pa.string()),
    ("messages", pa.list_(pa.struct([
        ("role", pa.string()), ("content", pa.string()),
        # the tool-call protocol's: an assistant's calls, and the call a tool message answers
        ("tool_calls", pa.list_(pa.struct([("id", pa.string()), ("name", pa.string()), ("arguments", pa.string())]))),
        ("tool_call_id", pa.string())]))),
    ("turns", pa.list_(_TURN)),
    ("n_tokens", pa.int64()),
    ("env_name", pa.string()),
    ("env_category", pa.string()),
    ("env_domain", pa.string()),
    ("env_source", pa.string()),
    ("env_round", pa.int64()),
    ("env_assignment_id", pa.string()),
])
"""One row per training attempt; docs/EXPORTS.md says what each column holds."""


def row(ref: TrajectoryRef, traj: Trajectory, env: PoolEntry | None) -> dict[str, object]:
    return {
        "rollout_id": ref.rollout_id, "role": ref.role, "env_id": ref.env_id, "group_id": ref.group_id,
        "group_size": ref.group_size, "wave_id": ref.episode_id, "policy_version": ref.policy_version,
        "reward": ref.reward, "task_reward": traj.reward, "metrics": json.dumps(traj.metrics, sort_keys=True),
        "model": traj.model, "stop_reason": traj.stop_reason,
        "messages": [_message(m) for m in traj.messages],
        "turns": [{"reply": t.reply, "prompt_token_ids": t.prompt_token_ids,
                   "completion_token_ids": t.completion_token_ids, "completion_logprobs": t.completion_logprobs,
                   "temperature": t.temperature, "policy_version": t.policy_version} for t in traj.turns],
        "n_tokens": traj.n_tokens,
        "env_name": env.name if env else "", "env_category": env.category if env else "",
        "env_domain": env.domain if env else "", "env_source": env.source if env else "",
        "env_round": env.round if env else 0, "env_assignment_id": env.assignment_id if env else "",
    }


def _message(m: dict) -> dict[str, object]:
    calls = [{"id": c.get("id", ""), "name": c.get("function", {}).get("name", ""),
              "arguments": c.get("function", {}).get("arguments", "")} for c in m.get("tool_calls", [])]
    return {"role": m.get("role", ""), "content": m.get("content", ""), "tool_calls": calls,
            "tool_call_id": m.get("tool_call_id", "")}


def select(refs: Iterable[TrajectoryRef], roles: Sequence[str] = (), since: int = 0) -> list[TrajectoryRef]:
    """The attempts of ``roles`` (all when empty) sampled at ``since`` or later, once each
    (a republished ref has the same rollout id), in bus order."""
    out: dict[str, TrajectoryRef] = {}
    for r in refs:
        if (not roles or r.role in roles) and r.policy_version >= since:
            out.setdefault(r.rollout_id, r)
    return list(out.values())


def write(rows: list[dict[str, object]], folder: Path, fmt: Format) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / FILES[fmt]
    if fmt == "parquet":
        pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), path)
    else:
        path.write_bytes(b"".join(msgspec.json.encode(r) + b"\n" for r in rows))
    return path


async def export(bus: Bus, folder: Path, fmt: Format = "parquet", roles: Sequence[str] = (),
                 since: int = 0) -> tuple[Path, int]:
    """Write the selected attempts under ``folder``; (the file, its rows)."""
    refs = select(await bus.history(subjects.TRAJECTORIES, TrajectoryRef), roles, since)
    store = PoolStore(await bus.kv(BUCKET))
    envs = {env_id: await store.entry(env_id) for env_id in {r.env_id for r in refs}}
    trajectories = await asyncio.gather(*(asyncio.to_thread(load_trajectory, bus.blobs, r.trajectory) for r in refs))
    rows = [row(r, t, envs[r.env_id]) for r, t in zip(refs, trajectories)]
    return await asyncio.to_thread(write, rows, folder, fmt), len(rows)
