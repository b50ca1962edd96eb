"""The helpdesk's final state (the file the service wrote) against its starting data:
Acme Corp's open tickets handled per the policy, everything else exactly as it was."""

import json

import pytest

SEED = "/srv/service/seed.json"
STATE = "/srv/service/state.json"
CLOSE = [1036, 1063, 1144, 1196, 1210]
TO_FINANCE = [1009, 1055, 1115, 1135]


def tickets(path):
    with open(path) as f:
        return {t["id"]: t for t in json.load(f)["tickets"]}


@pytest.fixture(scope="module")
def before():
    return tickets(SEED)


@pytest.fixture(scope="module")
def after():
    return tickets(STATE)


@pytest.mark.parametrize("ticket_id", CLOSE)
def test_non_billing_ticket_closed_wont_fix(ticket_id, before, after):
    t = after[ticket_id]
    assert (t["status"], t["resolution"]) == ("closed", "wont_fix")
    assert t["notes"] == before[ticket_id]["notes"] + [{"text": "customer offboarded"}]
    assert {k: v for k, v in t.items() if k not in ("status", "resolution", "notes")} == \
        {k: v for k, v in before[ticket_id].items() if k not in ("status", "resolution", "notes")}


@pytest.mark.parametrize("ticket_id", TO_FINANCE)
def test_billing_ticket_handed_to_finance_and_left_open(ticket_id, before, after):
    t = after[ticket_id]
    assert t["notes"] == before[ticket_id]["notes"] + [{"text": "customer offboarded: billing follow-up"}]
    assert t["team"] == "finance"
    assert {k: v for k, v in t.items() if k not in ("team", "notes")} == \
        {k: v for k, v in before[ticket_id].items() if k not in ("team", "notes")}


def test_exactly_the_policy_tickets_changed(before, after):
    assert sorted(after) == sorted(before), "tickets were added or removed"
    changed = sorted(i for i in before if after[i] != before[i])
    assert changed == sorted(CLOSE + TO_FINANCE)
