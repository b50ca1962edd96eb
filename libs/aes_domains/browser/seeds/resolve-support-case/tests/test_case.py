"""The saved console state: Marta Quiroga's case (CS-1031) resolved by Priya Nair with the
note, its earlier notes kept, every other case exactly as it was. Each test first requires
the save to have happened, so doing nothing earns nothing."""

import json
from pathlib import Path

import pytest

STATE = Path("/srv/web/state.json")
INITIAL = json.loads((Path(__file__).parent / "initial_state.json").read_text())
TARGET = "CS-1031"
NOTE = "Duplicate charge refunded, refund RF-20931."


@pytest.fixture
def cases() -> dict:
    return {c["id"]: c for c in json.loads(STATE.read_text())["cases"]}


@pytest.fixture
def target(cases: dict) -> dict:
    case = cases[TARGET]
    assert case["status"] == "resolved", f"{TARGET} is {case['status']!r}, not resolved"
    return case


def test_target_resolved(target):
    assert target["status"] == "resolved"


def test_target_assigned_to_priya_nair_of_billing(target):
    assert target["assignee"] == "pnair"


def test_note_added(target):
    assert target["notes"][-1]["text"].strip() == NOTE


def test_earlier_notes_kept(target):
    before = next(c for c in INITIAL["cases"] if c["id"] == TARGET)["notes"]
    assert target["notes"][:len(before)] == before
    assert len(target["notes"]) == len(before) + 1


@pytest.mark.parametrize("other", [c["id"] for c in INITIAL["cases"] if c["id"] != TARGET])
def test_other_case_untouched(target, cases, other):
    assert cases[other] == next(c for c in INITIAL["cases"] if c["id"] == other)


def test_agents_untouched(target):
    assert json.loads(STATE.read_text())["agents"] == INITIAL["agents"]
