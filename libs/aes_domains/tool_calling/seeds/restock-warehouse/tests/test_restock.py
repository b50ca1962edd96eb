"""The stockroom's final state (the file the service wrote) against its starting data: one
correct new order per SKU of Berlin Süd that the policy restocks, nothing else changed."""

import json

import pytest

SEED = "/srv/service/seed.json"
STATE = "/srv/service/state.json"
WAREHOUSE = "ber-2"
# SKU -> cases: position = on_hand + open orders' units; at or below the reorder point,
# ceil((target - position) / case_size). SKU-4142 counts its open order (12 without it),
# SKU-4198 must not count its cancelled one, SKU-4205 sits exactly at its reorder point.
EXPECTED = {"SKU-4100": 6, "SKU-4142": 11, "SKU-4170": 5, "SKU-4198": 11, "SKU-4205": 20}


def load(path):
    with open(path) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def before():
    return load(SEED)


@pytest.fixture(scope="module")
def after():
    return load(STATE)


@pytest.fixture(scope="module")
def new_orders(before, after):
    old = {o["id"] for o in before["orders"]}
    return [o for o in after["orders"] if o["id"] not in old]


@pytest.mark.parametrize("sku", sorted(EXPECTED))
def test_sku_restocked_with_the_fewest_whole_cases(sku, new_orders):
    mine = [o for o in new_orders if o["sku"] == sku and o["warehouse"] == WAREHOUSE]
    assert len(mine) == 1, f"expected one new order for {sku}, found {mine}"
    assert (mine[0]["cases"], mine[0]["status"]) == (EXPECTED[sku], "open")


def test_only_policy_orders_were_placed(new_orders):
    placed = sorted((o["warehouse"], o["sku"]) for o in new_orders)
    assert placed == [(WAREHOUSE, sku) for sku in sorted(EXPECTED)]


def test_nothing_else_changed(before, after, new_orders):
    assert new_orders, "no order was placed"
    assert after["orders"][:len(before["orders"])] == before["orders"], "existing orders changed"
    for key in ("warehouses", "products", "stock"):
        assert after[key] == before[key], f"{key} changed"
