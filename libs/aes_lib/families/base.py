"""What a family is: a name, a difficulty range, and the task text for one set of parameters."""

from __future__ import annotations

import dataclasses
import random
from abc import ABC, abstractmethod
from typing import Any, ClassVar


class FamilyError(ValueError):
    """A family cannot be found or instantiated as asked."""


class UnknownFamilyError(FamilyError):
    """No family is registered under the name."""


class FamilyParamsError(FamilyError):
    """Parameters a family does not accept (a difficulty out of its range, a non-integer)."""


class NotAFamilyInstanceError(FamilyError):
    """A task that no family wrote (its task.toml has no valid ``[metadata.family]``)."""


@dataclasses.dataclass(frozen=True)
class Params:
    """One instance's parameters: together with the family's name they determine the task."""

    difficulty: int
    seed: int


@dataclasses.dataclass(frozen=True)
class Instance:
    """Which family wrote a task, and with which parameters. Here, not beside the task writer
    (``render``, which needs the bundle and sandbox packages), so that code without those
    (bench/gpu_pools_experiment.py on a lent GPU) builds pools of instances too."""

    family: str
    params: Params

    def metadata(self) -> dict[str, Any]:
        return {"name": self.family, "difficulty": self.params.difficulty, "seed": self.params.seed}


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """The text of one instance; ``render`` adds the files every family's task shares."""

    instruction: str
    description: str
    """task.toml's one-line ``[task] description``."""
    solution: str
    """solve.sh's body after the shebang (bash, ``set -euo pipefail``)."""
    tests: str
    """tests/test_task.py: pytest checks of the end state, one test per unit of credit."""
    near_miss: str = ""
    """A command a learner plausibly writes instead (bash; empty: none): it scores on some
    instances and not on others, so a policy shown it beside ``solution`` has a choice to settle."""


class Family(ABC):
    """A parametric task family. Subclasses set the class attributes and ``spec``."""

    name: ClassVar[str]
    """Registry name; also the tasks' ``[metadata] category``, so the planner balances families."""
    summary: ClassVar[str]
    min_difficulty: ClassVar[int] = 1
    max_difficulty: ClassVar[int]
    curriculum: ClassVar[bool] = True
    """Each step up adds a unit of credit built on the step below (what an adaptive pool can climb);
    False for a control whose difficulty changes the text, not the skill."""

    def check(self, params: Params) -> Params:
        """``params`` if this family accepts them; ``FamilyParamsError`` saying why not."""
        for field in ("difficulty", "seed"):
            value = getattr(params, field)
            if not isinstance(value, int) or isinstance(value, bool):
                raise FamilyParamsError(f"family {self.name!r}: {field} must be an integer, got {value!r}")
        if not self.min_difficulty <= params.difficulty <= self.max_difficulty:
            raise FamilyParamsError(f"family {self.name!r}: difficulty {params.difficulty} is outside "
                                    f"[{self.min_difficulty}, {self.max_difficulty}]")
        if params.seed < 0:
            raise FamilyParamsError(f"family {self.name!r}: seed must be >= 0, got {params.seed}")
        return params

    def instance(self, params: Params) -> TaskSpec:
        """The task for ``params``; the same parameters always give the same task."""
        p = self.check(params)
        return self.spec(p.difficulty, random.Random(f"{self.name}/{p.difficulty}/{p.seed}"))

    def lesson(self, seed: int, levels: int, near_miss_share: float, draw: random.Random,
               miss: random.Random) -> tuple[str, str]:
        """One supervised example for a starting policy meant to solve the ``levels`` easiest
        difficulties: (instruction, command). Here an instance of one of those difficulties,
        answered with its reference or, for ``near_miss_share`` of them, its near miss; ``draw``
        picks the instance, ``miss`` the answer (apart, so the instances do not move with the share)."""
        d = draw.randint(self.min_difficulty, min(self.max_difficulty, self.min_difficulty + levels - 1))
        task = self.instance(Params(d, seed))
        return task.instruction, task.near_miss if task.near_miss and miss.random() < near_miss_share else task.solution

    @abstractmethod
    def spec(self, difficulty: int, rng: random.Random) -> TaskSpec:
        """The task at ``difficulty``, every random choice drawn from ``rng``."""
