"""Trajectories (``aes_proto.trajectory``) as the agents build, store and read them."""

from __future__ import annotations

import hashlib

from aes_proto.messages import BlobRef
from aes_proto.trajectory import Trajectory, Turn, decode_trajectory, encode_trajectory, trajectory_key


def turn_from_chat(index: int, chat) -> Turn:
    """The record of one model call (an ``aes_lib.models.ChatTurn``), before its action ran."""
    return Turn(index=index, reply=chat.text, prompt_token_ids=chat.prompt_token_ids,
                completion_token_ids=chat.completion_token_ids, completion_logprobs=chat.completion_logprobs,
                prompt_tokens=chat.prompt_tokens, completion_tokens=chat.completion_tokens,
                model_seconds=chat.seconds, temperature=chat.temperature, policy_version=chat.policy_version)


def record_chat(traj: Trajectory, chat) -> Turn:
    """One model call of a proposer episode without tools (the baselines, ``parametric``) into
    ``traj``: its turn, tokens, cost and reply; returns the turn."""
    traj.turns.append(turn := turn_from_chat(len(traj.turns), chat))
    traj.prompt_tokens += chat.prompt_tokens
    traj.completion_tokens += chat.completion_tokens
    traj.cost_usd += chat.cost_usd
    traj.messages.append({"role": "assistant", "content": chat.text})
    return turn


def store_trajectory(store, traj: Trajectory) -> BlobRef:
    """JSON under ``trajectories/<role>/<rollout_id>/<sha256[:16]>.json`` (``trajectory_key``)."""
    data = encode_trajectory(traj)
    return store.put_bytes(trajectory_key(traj.role, traj.rollout_id, hashlib.sha256(data).hexdigest()), data)


def load_trajectory(store, ref: BlobRef) -> Trajectory:
    return decode_trajectory(store.get_bytes(ref))
