"""Family instances pass the validator's checks with real Docker, at their easiest and hardest:
the image builds, the reference solution scores 1.0, the empty solution below 0.5 (here 0),
and no tamper probe forges the reward."""

from __future__ import annotations

import ast
import re
import uuid

import pytest

from aes_lib import families
from aes_lib.bundle import Task
from aes_lib.domains.validation import validate_in_domain
from aes_lib.families import Params
from aes_lib.families.builtin import BUILTIN
from aes_lib.sandbox.trial import run_trial
from scripted import ShellAgent

pytestmark = pytest.mark.docker

CASES = [(f.name, level) for f in BUILTIN for level in ("min", "max")]


@pytest.mark.parametrize(("name", "level"), CASES)
async def test_instance_validates(tmp_path, images, name, level):
    f = families.get(name)
    difficulty = f.min_difficulty if level == "min" else f.max_difficulty
    root = families.write_instance(f, Params(difficulty, 2026), tmp_path / "task")
    label = {"aes.managed": "1", "aes.test": f"families-{uuid.uuid4().hex[:8]}"}
    report = await validate_in_domain(root, images, labels=label)
    assert report.ok, f"{report.reason}: {report.detail}\n{report.logs[-4000:]}"
    assert report.oracle_reward == 1.0 and report.nop_reward == 0.0
    left = images.client.containers.list(all=True, filters={"label": f"aes.test={label['aes.test']}"})
    assert not left, f"containers left behind: {[c.name for c in left]}"


async def test_a_partly_right_answer_earns_partial_credit(tmp_path, images):
    """What makes the difficulty climbable: each right unit counts, so a policy that gets some of
    the words earns a reward between the empty solution's and the reference's."""
    f = families.get("echo-words")
    root = families.write_instance(f, Params(4, 5), tmp_path / "task")
    words = re.search(r"WORDS = (\[.*\])", (root / "tests" / "test_task.py").read_text()).group(1)
    first_two = " ".join(ast.literal_eval(words)[:2])
    result = await run_trial(Task.load(root), ShellAgent(f"printf '%s\\n' {first_two} > /app/answer.txt"), images,
                             labels={"aes.managed": "1", "aes.test": f"families-{uuid.uuid4().hex[:8]}"})
    assert result.reward == pytest.approx(2 / 5), result.log()  # 2 of 4 words in place, the line count wrong


@pytest.mark.parametrize(("difficulty", "expected"), [(1, 1.0), (3, 0.0)])
async def test_the_near_miss_is_right_for_one_word_and_wrong_from_two(tmp_path, images, difficulty, expected):
    """echo-words' near miss (``echo`` on one line) scores as its docstring says, through the
    verifier: the choice it leaves a bootstrapped policy is settled only above difficulty 1."""
    f, params = families.get("echo-words"), Params(difficulty, 11)
    root = families.write_instance(f, params, tmp_path / "task")
    result = await run_trial(Task.load(root), ShellAgent(f.instance(params).near_miss), images,
                             labels={"aes.managed": "1", "aes.test": f"families-{uuid.uuid4().hex[:8]}"})
    assert result.reward == expected, result.log()
