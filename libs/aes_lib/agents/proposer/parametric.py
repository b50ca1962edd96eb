"""The parametric mode: a model chooses the difficulty of a task family's next instance.

The procedural mode with its one decision taken by the proposer's model, so that the policy that
solves can also propose and be trained on r_P (the paper's "one model in both roles"). One call:
the prompt names the family and its summary, its difficulty range, the parent's difficulty and
pass rate and the planner's direction (``messages``); the reply must be the single line
``difficulty: N`` (any spaces after the colon) with N in the family's range. Anything else is a failed proposal --
``no_difficulty`` (not that line) or ``difficulty_out_of_range`` -- whose turn is still the
policy's sample (r_P 0 teaches the format). The base instance, the seed (the assignment's key:
a redelivery writes the same instance for the same answer, and the model samples with that seed
too) and the writing are procedural's.
"""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from pathlib import Path

from aes_lib import families
from aes_lib.agents.proposer import procedural
from aes_lib.agents.proposer.baselines import BaselineLimits
from aes_lib.agents.proposer.parametric_prompt import MAX_TOKENS, ParametricAnswerError, messages, parse
from aes_lib.agents.proposer.proposal import Proposal
from aes_lib.agents.trajectory import record_chat, store_trajectory
from aes_lib.bundle import PackedBundle
from aes_lib.models import ChatClient, ModelError
from aes_proto.messages import Assignment
from aes_proto.trajectory import Trajectory

MODE = "parametric"


async def _chosen(a: Assignment, client: ChatClient, limits: BaselineLimits, family: families.Family,
                  base: families.Instance, traj: Trajectory, tmp: Path) -> tuple[PackedBundle | None, str]:
    """The model's instance of ``family`` (``base``'s), or the failure's name."""
    traj.messages = messages(family, base.params.difficulty, a.direction, a.pass_rate)
    traj.instruction = traj.messages[-1]["content"]
    try:
        chat = await client.chat(traj.messages, max_tokens=MAX_TOKENS, temperature=limits.temperature,
                                 seed=procedural.child_seed(a))
    except ModelError as e:
        traj.error = str(e)
        return None, "model_error"
    turn = record_chat(traj, chat)
    try:
        difficulty = parse(chat.text, family)
    except ParametricAnswerError as e:
        traj.format_errors += 1
        turn.format_error, turn.output, traj.error = True, str(e), str(e)
        return None, e.failure
    params = families.Params(difficulty, procedural.child_seed(a))
    return await asyncio.to_thread(procedural.write_child, family, params, tmp), ""


async def generate(a: Assignment, client: ChatClient, store, limits: BaselineLimits = BaselineLimits()) -> Proposal:
    """The model's choice of the next instance for ``a``; a parent that no family wrote is
    ``not_procedural`` (no model call)."""
    traj = Trajectory(rollout_id=uuid.uuid4().hex, role="proposer", env_id=a.lineage.parent_env_id or "",
                      model=client.model)
    packed, failure = None, ""
    with tempfile.TemporaryDirectory(prefix="aes-parametric-") as tmp:
        try:
            base = await asyncio.to_thread(procedural.base_instance, a, store, Path(tmp))
            family = families.get(base.family)
        except families.FamilyError as e:
            failure, traj.error = "not_procedural", str(e)
        else:
            packed, failure = await _chosen(a, client, limits, family, base, traj, Path(tmp))
    traj.stop_reason = "submitted" if packed else failure
    ref = await asyncio.to_thread(store_trajectory, store, traj)
    return Proposal(traj, ref, packed, failure=failure)
