"""Task families without Docker: determinism, the task's shape, the planner's moves and clear errors."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from aes_lib import families
from aes_lib.bundle import Task, pack
from aes_lib.families import Params
from aes_lib.families.registry import ENTRY_POINT_GROUP
from aes_lib.sandbox import VERIFIER_TEMPLATE

FAMILIES = families.names()


def _instance(tmp_path: Path, name: str, difficulty: int, seed: int, sub: str = "task") -> Path:
    return families.write_instance(families.get(name), Params(difficulty, seed), tmp_path / sub)


def test_the_builtins_are_registered_with_climbable_ranges():
    assert FAMILIES[:4] == ["echo-words", "reverse-text", "make-files", "pick-first"]
    for name in FAMILIES:
        f = families.get(name)
        assert f.name == name and f.max_difficulty - f.min_difficulty >= 4 and f.summary


@pytest.mark.parametrize("name", FAMILIES)
def test_same_parameters_same_bundle_other_seed_or_difficulty_another(tmp_path, name):
    a = pack(_instance(tmp_path, name, 3, 11, "a"))
    b = pack(_instance(tmp_path, name, 3, 11, "b"))
    assert a.sha256 == b.sha256  # the env id is a function of (family, difficulty, seed)
    assert pack(_instance(tmp_path, name, 3, 12, "c")).sha256 != a.sha256
    assert pack(_instance(tmp_path, name, 4, 11, "d")).sha256 != a.sha256


@pytest.mark.parametrize("name", FAMILIES)
def test_an_instance_is_a_harbor_task_like_the_seeds(tmp_path, name):
    f = families.get(name)
    root = _instance(tmp_path, name, f.max_difficulty, 5)
    task = Task.load(root)  # the bundle checks every candidate passes
    assert task.name == f"aes-families/{name}-d{f.max_difficulty}-s5" and task.has_solution
    cfg = tomllib.loads((root / "task.toml").read_text())
    assert cfg["metadata"]["family"] == {"name": name, "difficulty": f.max_difficulty, "seed": 5}
    assert cfg["metadata"]["category"] == name and cfg["metadata"]["difficulty"] == "hard"
    assert cfg["environment"]["allow_internet"] is False
    assert (root / "environment" / "Dockerfile").read_text().splitlines()[0] == "FROM aes-base:latest"
    assert (root / "tests" / "test.sh").read_bytes() == (VERIFIER_TEMPLATE / "test.sh").read_bytes()
    assert "/tests" not in (root / "solution" / "solve.sh").read_text()
    assert (root / "solution" / "solve.sh").stat().st_mode & 0o111
    easy = tomllib.loads((_instance(tmp_path, name, f.min_difficulty, 5, "easy") / "task.toml").read_text())
    assert easy["metadata"]["difficulty"] == "easy"


def _units(f: families.Family, difficulty: int) -> tuple[int, int]:
    """(test functions, expected values) of an instance's generated tests."""
    spec = f.instance(Params(difficulty, 3))
    scope: dict = {}
    exec(compile(spec.tests, "test_task.py", "exec"), scope)  # the generated tests are valid Python
    data = next(v for k, v in scope.items() if k.isupper() and isinstance(v, (list, dict, str)) and k != "ANSWER")
    return sum(k.startswith("test_") for k in scope), len(data)


@pytest.mark.parametrize("name", [n for n in FAMILIES if families.get(n).curriculum])
def test_difficulty_adds_units_of_credit(tmp_path, name):
    """Each step up adds a test case (one unit of the fractional reward) and lengthens the answer."""
    f = families.get(name)
    counts = [_units(f, d)[1] for d in range(f.min_difficulty, f.max_difficulty + 1)]
    assert counts == sorted(set(counts)) and len(counts) == f.max_difficulty - f.min_difficulty + 1


def test_the_control_family_asks_the_same_at_every_difficulty():
    """pick-first: a longer list, the same two checks (the first word; nothing else)."""
    f = families.get("pick-first")
    assert not f.curriculum
    assert {_units(f, d)[0] for d in range(f.min_difficulty, f.max_difficulty + 1)} == {2}
    assert [_units(f, d)[1] for d in (1, 8)] == [2, 9]  # the list grows
    hard = f.instance(Params(8, 4))
    first = re.search(r"WORDS = \['([a-z]+)'", hard.tests).group(1)
    assert f"1. `{first}`" in hard.instruction and hard.solution.endswith(f"{first} > /app/answer.txt")


def test_instructions_state_what_the_tests_check(tmp_path):
    """The instruction carries every expected value (the solver sees nothing else)."""
    words = families.get("echo-words").instance(Params(5, 9))
    for w in re.findall(r"'([a-z]+)'", words.tests.split("WORDS = ")[1].splitlines()[0]):
        assert f"`{w}`" in words.instruction
    rev = families.get("reverse-text").instance(Params(4, 9))
    expected = re.search(r"EXPECTED = '([a-z]+)'", rev.tests).group(1)
    assert f"`{expected[::-1]}`" in rev.instruction and len(expected) == 6


@pytest.mark.parametrize(("start", "direction", "pass_rate", "expected"), [
    (3, "harder", None, 4), (3, "easier", None, 2), (3, "new", None, 3), (3, "revise", None, 3),
    (3, "harder", 0.75, 4), (3, "easier", 0.25, 2),
    # no spread on the parent: the band is beyond one step, so two
    (3, "harder", 1.0, 5), (5, "easier", 0.0, 3), (3, "new", 1.0, 3),
    (8, "harder", None, 8), (1, "easier", None, 1), (7, "harder", 1.0, 8), (2, "easier", 0.0, 1),  # clamped
])
def test_planner_directions_move_the_difficulty_and_clamp(start, direction, pass_rate, expected):
    f = families.get("echo-words")
    assert (f.min_difficulty, f.max_difficulty) == (1, 8)
    child = families.moved(f, Params(start, 0), direction, seed=42, pass_rate=pass_rate)
    assert child == Params(expected, 42)


def test_unknown_family_and_bad_parameters_are_clear_errors(tmp_path):
    with pytest.raises(families.UnknownFamilyError, match=r"unknown task family 'sudoku' \(known: echo-words, "):
        families.get("sudoku")
    f = families.get("make-files")
    with pytest.raises(families.FamilyParamsError, match=r"difficulty 7 is outside \[1, 6\]"):
        families.write_instance(f, Params(7, 0), tmp_path / "t")
    with pytest.raises(families.FamilyParamsError, match="difficulty must be an integer, got '3'"):
        f.instance(Params("3", 0))  # type: ignore[arg-type]
    with pytest.raises(families.FamilyParamsError, match="seed must be >= 0"):
        f.instance(Params(2, -1))
    assert not (tmp_path / "t").exists()  # nothing half-written


def test_reading_the_instance_back_from_a_task(tmp_path):
    root = _instance(tmp_path, "reverse-text", 6, 77)
    assert families.read_instance(root) == families.Instance("reverse-text", Params(6, 77))
    with pytest.raises(families.NotAFamilyInstanceError, match=r"no \[metadata.family\]"):
        families.read_instance(Path(__file__).resolve().parents[2] / "seeds" / "csv-sales-rollup")
    with pytest.raises(families.UnknownFamilyError):
        families.instance_of({"family": {"name": "sudoku", "difficulty": 1, "seed": 0}})
    with pytest.raises(families.FamilyParamsError, match="difficulty 99 is outside"):
        families.instance_of({"family": {"name": "reverse-text", "difficulty": 99, "seed": 0}})
    with pytest.raises(families.FamilyParamsError, match="seed must be an integer, got None"):
        families.instance_of({"family": {"name": "reverse-text", "difficulty": 2}})


def test_a_plugin_family_comes_from_its_entry_point(monkeypatch):
    from importlib.metadata import EntryPoint

    from aes_lib.families import registry

    eps = [EntryPoint("plug-words", "aes_lib.families.builtin:BUILTIN", ENTRY_POINT_GROUP),
           EntryPoint("echo-words", "os:sep", ENTRY_POINT_GROUP)]
    monkeypatch.setattr(registry, "entry_points", lambda group: eps if group == ENTRY_POINT_GROUP else [])
    registry._registered.cache_clear()
    registry.get.cache_clear()
    try:
        assert registry.names()[-1] == "plug-words"
        assert registry.get("echo-words") is registry.BUILTIN[0]  # a plug-in cannot replace a built-in
        with pytest.raises(families.UnknownFamilyError, match="is not a Family named 'plug-words'"):
            registry.get("plug-words")  # the attribute is a tuple, not a Family
    finally:
        registry._registered.cache_clear()
        registry.get.cache_clear()


def test_harbor_reads_an_instance_task_toml(tmp_path, harbor):
    roots = [_instance(tmp_path, name, 2, 1, name) for name in FAMILIES]
    script = ("import sys, pathlib; from harbor.models.task.config import TaskConfig\n"
              "for d in sys.argv[1:]:\n"
              "    print(TaskConfig.model_validate_toml((pathlib.Path(d) / 'task.toml').read_text()).task.name)\n")
    result = subprocess.run([str(harbor.parent / "python"), "-c", script, *map(str, roots)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [f"aes-families/{n}-d2-s1" for n in FAMILIES]
