"""The leak scan (``aes_lib.sandbox.leaks``) on a real Docker engine: a task whose image carries
its own tests or solution is ``answer_in_image``; a pristine copy of what the solver is given is not."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from aes_lib.sandbox import validate_task

pytestmark = [pytest.mark.docker]
ECHO = Path(__file__).parents[1] / "sandbox" / "tasks" / "echo"


def variant(tmp_path: Path, name: str, dockerfile_extra: str, files: dict[str, str]) -> Path:
    d = tmp_path / name
    shutil.copytree(ECHO, d)
    for rel, text in files.items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_text(text)
    with (d / "environment" / "Dockerfile").open("a") as f:
        f.write(dockerfile_extra)
    return d


async def test_the_solution_in_a_layer_or_the_tests_in_git_history_are_found(tmp_path, images, test_label):
    solve = (ECHO / "solution" / "solve.sh").read_text()
    layered = variant(tmp_path, "layered", "COPY notes.sh /opt/notes.sh\n", {"environment/notes.sh": solve})
    r = await validate_task(layered, images, labels=test_label, probe=False)
    assert (r.reason, r.oracle_reward) == ("answer_in_image", 1.0)
    assert "solution/solve.sh at /opt/notes.sh" in r.detail

    tests = (ECHO / "tests" / "test_outputs.py").read_text()
    history = variant(tmp_path, "history", (
        "COPY old.py /app/old.py\n"
        "RUN cd /app && git init -q && git add old.py && git -c user.email=a@b -c user.name=a commit -qm add "
        "&& git rm -q old.py && git -c user.email=a@b -c user.name=a commit -qm remove\n"), {"environment/old.py": tests})
    r = await validate_task(history, images, labels=test_label, probe=False)
    assert r.reason == "answer_in_image", r.detail
    assert "tests/test_outputs.py at /app/.git@" in r.detail  # only history holds it now


async def test_a_pristine_copy_of_the_solvers_input_is_no_leak(tmp_path, images, test_label):
    lines = "".join(f"line {i} of the input the solver counts\n" for i in range(3))
    given = variant(tmp_path, "given", "", {"environment/input.txt": lines, "tests/input_copy.txt": lines})
    r = await validate_task(given, images, labels=test_label, probe=False)
    assert (r.reason, r.oracle_reward, r.nop_reward) == ("ok", 1.0, 0.0), r.detail
