"""The ladder family (issue 48): one more step per difficulty, each its own decision, all or
nothing, and a start that has seen every step above its levels both ways."""

from __future__ import annotations

import random
import uuid

import pytest

from aes_lib import families
from aes_lib.bundle import Task
from aes_lib.families import Params
from aes_lib.families.builtin import LADDER_STEPS, Ladder
from aes_lib.sandbox.trial import run_trial
from aes_ops.bootstrap_policy import PolicySpec, examples
from scripted import ShellAgent

LADDER = families.get("ladder")


def _lines(command: str) -> list[str]:
    """The lines a ladder command writes (``printf '%s\\n' alpha=red bravo=dog > /app/answer.txt``)."""
    return command.split("' ", 1)[1].rsplit(" >", 1)[0].split()


def test_each_step_chooses_between_two_words_of_its_own():
    task = LADDER.instance(Params(LADDER.max_difficulty, 3))
    lines = _lines(task.solution)
    assert lines == [f"{key}={word}" for key, word, _ in LADDER_STEPS]
    words = [w for _, word, other in LADDER_STEPS for w in (word, other)]
    assert len(set(words)) == len(words)  # no token a step settles is another step's choice
    for line in lines:
        assert f"`{line}`" in task.instruction  # every requirement is stated


def test_the_tests_are_one_all_or_nothing_check():
    task = LADDER.instance(Params(5, 1))
    assert task.tests.count("\ndef test_") == 1 and "@pytest.mark.parametrize" not in task.tests


@pytest.mark.parametrize("share", [0.5, 0.75])
def test_lessons_keep_the_first_levels_right_and_show_every_later_step_both_ways(share):
    """What makes a level's pass rate the product of its steps': the start never errs on the first
    ``levels`` steps and errs by a coin on each later one, at every difficulty."""
    spec = PolicySpec(examples=1200, levels=2, near_miss_share=share)
    wrong = [0] * LADDER.max_difficulty
    shown = [0] * LADDER.max_difficulty
    difficulties = set()
    for instruction, reply in examples(["ladder"], spec):
        command = reply.removeprefix("```bash\n").removesuffix("\n```")
        stated = [line.strip("`").split(". `", 1)[-1] for line in instruction.splitlines() if ". `" in line]
        got = _lines(command)
        difficulties.add(len(got))
        assert len(got) == len(stated)
        for step, (line, right) in enumerate(zip(got, [s.rstrip("`") for s in stated])):
            shown[step] += 1
            wrong[step] += line != right
            key, word, other = LADDER_STEPS[step]
            assert right == f"{key}={word}" and line in (right, f"{key}={other}"), (line, right)  # only the word differs
    assert difficulties == set(range(1, LADDER.max_difficulty + 1))
    assert wrong[:2] == [0, 0]
    for step in range(2, LADDER.max_difficulty):
        assert abs(wrong[step] / shown[step] - share) < 0.2, (step, wrong[step], shown[step])


def test_a_lesson_is_the_instance_it_names():
    instruction, command = LADDER.lesson(77, 0, 0.0, random.Random(4), random.Random(5))
    d = len(_lines(command))
    assert instruction == LADDER.instance(Params(d, 77)).instruction


@pytest.mark.docker
@pytest.mark.parametrize("wrong_step", [0, 3])
async def test_one_wrong_word_scores_zero_through_the_verifier(tmp_path, images, wrong_step):
    params = Params(4, 21)
    root = families.write_instance(LADDER, params, tmp_path / "task")
    lines = Ladder.entries(4, wrong=frozenset({wrong_step}))
    result = await run_trial(Task.load(root), ShellAgent(f"printf '%s\\n' {' '.join(lines)} > /app/answer.txt"),
                             images, labels={"aes.managed": "1", "aes.test": f"ladder-{uuid.uuid4().hex[:8]}"})
    assert result.reward == 0.0, result.log()
    assert LADDER.instance(params).near_miss.endswith(f"gamma=south > {families.builtin.ANSWER}")


@pytest.mark.docker
async def test_lines_after_a_levels_own_are_not_checked(tmp_path, images):
    """Where to stop is no decision: a level-3 reply that goes on to step 4 passes level 3, so
    training at one level cannot teach the policy to stop there (pilot 5's oracle learned that)."""
    root = families.write_instance(LADDER, Params(3, 21), tmp_path / "task")
    lines = Ladder.entries(4, wrong=frozenset({3}))
    result = await run_trial(Task.load(root), ShellAgent(f"printf '%s\\n' {' '.join(lines)} > /app/answer.txt"),
                             images, labels={"aes.managed": "1", "aes.test": f"ladder-{uuid.uuid4().hex[:8]}"})
    assert result.reward == 1.0, result.log()
