"""The saved shop settings: the four requested changes, the support phone kept but in the
international format, nothing else changed, and the change history extended. Each test
first requires the save to have happened, so doing nothing earns nothing."""

import json
from pathlib import Path

import pytest

STATE = Path("/srv/web/state.json")
INITIAL = json.loads((Path(__file__).parent / "initial_state.json").read_text())
EMAIL = "support@fernhill-ceramics.eu"


@pytest.fixture
def state() -> dict:
    data = json.loads(STATE.read_text())
    assert data["settings"]["support_email"] == EMAIL, "the settings were not saved with the new support email"
    return data


def test_support_email(state):
    assert state["settings"]["support_email"] == EMAIL


def test_currency_is_euro(state):
    assert state["settings"]["currency"] == "EUR"


def test_low_stock_threshold(state):
    assert state["settings"]["low_stock_threshold"] == 25


def test_order_notifications_on(state):
    assert state["settings"]["notify_orders"] is True


def test_support_phone_same_number_international_format(state):
    # 020 7946 0958 is a London number: +44, then the number without its leading 0.
    assert state["settings"]["support_phone"] == "+442079460958"


@pytest.mark.parametrize("field", ["store_name", "timezone", "notify_returns"])
def test_other_setting_unchanged(state, field):
    assert state["settings"][field] == INITIAL["settings"][field]


def test_history_extended(state):
    before = INITIAL["history"]
    assert state["history"][:len(before)] == before
    changed = {h["field"] for h in state["history"][len(before):]}
    assert changed == {"support_email", "currency", "low_stock_threshold", "notify_orders", "support_phone"}
