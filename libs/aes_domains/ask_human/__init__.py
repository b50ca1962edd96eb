"""Ask-human: tasks whose instruction withholds details on purpose (HiL-Bench style); the
solver may ask for them with the harness-side ``ask_human`` tool, and is scored on solving
and on asking well (Ask-F1). ``blockers`` is the registry of withheld details, ``tool`` the
tool and its metrics, ``hil`` the three settings of one task, ``gate`` the admission rules."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from aes_lib.domains.base import Domain

from aes_domains.ask_human.settings import AskHumanSettings

if TYPE_CHECKING:
    from aes_lib.bundle import Task
    from aes_lib.models import ChatClient

    from aes_domains.ask_human.tool import AskHumanSession


def tools(task: "Task", client: "ChatClient") -> "AskHumanSession | None":
    """The ask_human tool for an attempt at ``task``, in the ``ask_human`` setting only."""
    # Imported here: the registry loads DOMAIN to list domains, which needs no model client.
    from aes_domains.ask_human.blockers import load_blockers
    from aes_domains.ask_human.hil import setting_of
    from aes_domains.ask_human.tool import AskHumanSession

    if setting_of(task.config.metadata) != "ask_human":
        return None
    return AskHumanSession(load_blockers(task.root), client)


def shaped(task_reward: float, metrics: Mapping[str, float]) -> float | None:
    """The learner's reward: Ask-F1 mixed in at ``AES_ASK_F1_WEIGHT``; None (the task's reward
    alone) when the weight is 0 or the attempt had no ask_human tool."""
    from aes_domains.ask_human.tool import shaped_reward

    weight = AskHumanSettings.from_env().ask_f1_weight
    return shaped_reward(task_reward, metrics, weight) if weight and "ask_f1" in metrics else None


DOMAIN = Domain(
    name="ask-human",
    title="Asking for help",
    root=Path(__file__).parent,
    gate="aes_domains.ask_human.gate:AskHumanGate",
    tools=tools,
    shaped=shaped,
    settings=(("Ask-human tasks", AskHumanSettings),),
)
