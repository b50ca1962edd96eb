"""Settings of the ask-human domain (``[ask_human]`` in the config file, ``AES_<FIELD>`` variables)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Literal

from aes_lib.config import SettingsError, read_settings


@dataclasses.dataclass(frozen=True)
class AskHumanSettings:
    """How ask_human tasks are run and scored."""

    env_prefix: ClassVar[str] = "AES_"
    section: ClassVar[str] = "ask_human"
    ask_human_judge: Literal["model", "keywords"] = "model"
    """What decides which withheld detail an ``ask_human`` question asks for: ``model`` (the
    solver's own model as a judge, keywords when its reply is of no use) or ``keywords``."""
    ask_f1_weight: float = 0.0
    """Share of Ask-F1 in the reward the learner trains on for ask_human tasks (0: the task's reward)."""

    @classmethod
    def from_env(cls) -> "AskHumanSettings":
        return cls(**read_settings(cls, SettingsError))  # type: ignore[arg-type]
