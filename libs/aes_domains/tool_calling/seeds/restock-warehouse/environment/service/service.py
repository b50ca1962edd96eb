"""stockroom: stock levels, products and supplier orders of the company's warehouses."""

from aestools import CallError, Service

svc = Service("stockroom", state="/srv/service/state.json", seed="/srv/service/seed.json")
PAGE = 4
MAX_CASES = 50


def _warehouse(warehouse: str) -> str:
    if warehouse not in {w["id"] for w in svc.state["warehouses"]}:
        raise CallError(f"no warehouse {warehouse!r} (see list_warehouses)")
    return warehouse


def _product(sku: str) -> dict:
    for p in svc.state["products"]:
        if p["sku"] == sku:
            return p
    raise CallError(f"no product {sku!r}")


@svc.method
def list_warehouses() -> list:
    """Every warehouse: id and name."""
    return svc.state["warehouses"]


@svc.method
def stock_levels(warehouse: str, page: int = 1) -> dict:
    """What a warehouse stocks, 4 SKUs per page from page 1: {items: [{sku, on_hand,
    reorder_point, target_level}], page, pages}. Quantities are in units, not cases."""
    _warehouse(warehouse)
    rows = [s for s in svc.state["stock"] if s["warehouse"] == warehouse]
    pages = max(1, -(-len(rows) // PAGE))
    if not 1 <= page <= pages:
        raise CallError(f"page {page} out of range 1..{pages}")
    items = [{k: s[k] for k in ("sku", "on_hand", "reorder_point", "target_level")}
             for s in rows[(page - 1) * PAGE:page * PAGE]]
    return {"items": items, "page": page, "pages": pages}


@svc.method
def get_product(sku: str) -> dict:
    """A product: sku, name, case_size (units per case; suppliers ship whole cases only)
    and whether it is discontinued."""
    return _product(sku)


@svc.method
def list_orders(warehouse: str, sku: str = "") -> list:
    """Supplier orders of a warehouse (optionally of one SKU): {id, sku, cases, status};
    status is open (on its way), received (already counted in on_hand) or cancelled."""
    _warehouse(warehouse)
    return [{k: o[k] for k in ("id", "sku", "cases", "status")} for o in svc.state["orders"]
            if o["warehouse"] == warehouse and sku in ("", o["sku"])]


@svc.method(writes=True)
def place_order(warehouse: str, sku: str, cases: int) -> dict:
    """Order whole cases of a SKU the warehouse stocks (1..50 cases); the order starts open."""
    _warehouse(warehouse)
    product = _product(sku)
    if not any(s["warehouse"] == warehouse and s["sku"] == sku for s in svc.state["stock"]):
        raise CallError(f"{warehouse} does not stock {sku}")
    if product["discontinued"]:
        raise CallError(f"{sku} is discontinued")
    if not 1 <= cases <= MAX_CASES:
        raise CallError(f"cases must be 1..{MAX_CASES}, not {cases}")
    order = {"id": max(o["id"] for o in svc.state["orders"]) + 1, "warehouse": warehouse, "sku": sku,
             "cases": cases, "status": "open"}
    svc.state["orders"].append(order)
    return order


@svc.method(writes=True)
def cancel_order(order_id: int) -> dict:
    """Cancel an open order."""
    for o in svc.state["orders"]:
        if o["id"] == order_id:
            if o["status"] != "open":
                raise CallError(f"order {order_id} is {o['status']}, not open")
            o["status"] = "cancelled"
            return o
    raise CallError(f"no order {order_id}")


if __name__ == "__main__":
    svc.serve()
