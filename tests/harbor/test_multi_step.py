"""Multi-step tasks run as Harbor runs them: the steps in order in one agent container, the
agent given each step's instruction in turn, each step's tests, Harbor's reward rule."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from aes_lib.bundle import Task
from aes_lib.sandbox import AgentOutcome, run_trial
from aes_lib.sandbox.container import Sandbox

STEPS = Path(__file__).parent / "tasks" / "multi-step"
SOLVES = {  # by the step's instruction: only the first step is solved
    "Create /srv/log.txt holding the line `one`.\n": "mkdir -p /srv && echo one > /srv/log.txt",
}


@dataclasses.dataclass
class FirstStepOnly:
    """Solves the first step from its instruction alone (with ``solves``); records every
    instruction it is given."""

    solves: dict = dataclasses.field(default_factory=lambda: SOLVES)
    seen: list = dataclasses.field(default_factory=list)

    async def run(self, sandbox: Sandbox, instruction: str) -> AgentOutcome:
        self.seen.append(instruction)
        r = await sandbox.exec(self.solves.get(instruction, "true"), timeout=60, user=0)
        return AgentOutcome(exit_code=r.exit_code, output=r.output)


def _variant(tmp_path: Path, replace: tuple[str, str] = ("", "")) -> Task:
    dest = tmp_path / "task"
    shutil.copytree(STEPS, dest)
    toml = dest / "task.toml"
    toml.write_text(toml.read_text().replace(*replace))
    return Task.load(dest)


async def test_each_step_instruction_in_turn_and_the_mean_over_steps(images, test_label, tmp_path) -> None:
    task, agent = Task.load(STEPS), FirstStepOnly()
    result = await run_trial(task, agent, images, labels=test_label)
    assert agent.seen == list(task.steps)  # both instructions, in order, in one trial
    assert (result.reward, result.metrics) == (0.5, {"reward": 0.5}), result.log()  # Harbor's default: mean


async def test_final_strategy_takes_the_last_step(images, test_label, tmp_path) -> None:
    task = _variant(tmp_path, ('multi_step_reward_strategy = "mean"', 'multi_step_reward_strategy = "final"'))
    result = await run_trial(task, FirstStepOnly(), images, labels=test_label)
    assert result.reward == 0.0, result.log()


async def test_a_step_below_its_min_reward_ends_the_trial(images, test_label, tmp_path) -> None:
    task = _variant(tmp_path, ('[[steps]]\nname = "write"', '[[steps]]\nname = "write"\nmin_reward = 1.0'))
    idle = FirstStepOnly(solves={})
    stopped = await run_trial(task, idle, images, labels=test_label)
    assert idle.seen == [task.steps[0]] and stopped.reward == 0.0, stopped.log()  # step 2 never given
    agent = FirstStepOnly()
    result = await run_trial(task, agent, images, labels=test_label)
    assert agent.seen == list(task.steps) and result.reward == 0.5, result.log()  # step 1 met its minimum
