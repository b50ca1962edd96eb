"""helpdesk: customers' support tickets, read and changed through typed calls."""

from aestools import CallError, Service

svc = Service("helpdesk", state="/srv/service/state.json", seed="/srv/service/seed.json")
PAGE = 5
RESOLUTIONS = ("fixed", "duplicate", "wont_fix", "cannot_reproduce")


def _ticket(ticket_id: int) -> dict:
    for t in svc.state["tickets"]:
        if t["id"] == ticket_id:
            return t
    raise CallError(f"no ticket {ticket_id}")


def _open(ticket_id: int) -> dict:
    t = _ticket(ticket_id)
    if t["status"] == "closed":
        raise CallError(f"ticket {ticket_id} is closed")
    return t


@svc.method
def list_customers() -> list:
    """Every customer: id and name."""
    return svc.state["customers"]


@svc.method
def list_teams() -> list:
    """The teams a ticket can be assigned to."""
    return svc.state["teams"]


@svc.method
def find_tickets(customer: str, status: str = "", page: int = 1) -> dict:
    """Tickets of the customer with this id (exact), optionally of one status (open,
    pending, closed), 5 per page from page 1: {tickets: [{id, subject, status, tags}], page, pages}."""
    if customer not in {c["id"] for c in svc.state["customers"]}:
        raise CallError(f"no customer with id {customer!r} (see list_customers)")
    if status not in ("", "open", "pending", "closed"):
        raise CallError(f"status must be open, pending, closed or empty, not {status!r}")
    found = [t for t in svc.state["tickets"] if t["customer"] == customer and status in ("", t["status"])]
    pages = max(1, -(-len(found) // PAGE))
    if not 1 <= page <= pages:
        raise CallError(f"page {page} out of range 1..{pages}")
    shown = found[(page - 1) * PAGE:page * PAGE]
    return {"tickets": [{k: t[k] for k in ("id", "subject", "status", "tags")} for t in shown],
            "page": page, "pages": pages}


@svc.method
def get_ticket(ticket_id: int) -> dict:
    """One ticket with every field: customer, subject, status, tags, team, priority, resolution, notes."""
    return _ticket(ticket_id)


@svc.method(writes=True)
def close_ticket(ticket_id: int, resolution: str, note: str) -> dict:
    """Close an open or pending ticket with a resolution (fixed, duplicate, wont_fix,
    cannot_reproduce) and a note for the customer."""
    t = _open(ticket_id)
    if resolution not in RESOLUTIONS:
        raise CallError(f"resolution must be one of {', '.join(RESOLUTIONS)}, not {resolution!r}")
    if not note.strip():
        raise CallError("a closing note is required")
    t.update(status="closed", resolution=resolution)
    t["notes"].append({"text": note})
    return t


@svc.method(writes=True)
def reassign(ticket_id: int, team: str) -> dict:
    """Give an open or pending ticket to another team (see list_teams)."""
    t = _open(ticket_id)
    if team not in svc.state["teams"]:
        raise CallError(f"no team {team!r} (teams: {', '.join(svc.state['teams'])})")
    t["team"] = team
    return t


@svc.method(writes=True)
def add_note(ticket_id: int, text: str) -> dict:
    """Append a note to a ticket that is not closed."""
    t = _open(ticket_id)
    if not text.strip():
        raise CallError("the note is empty")
    t["notes"].append({"text": text})
    return t


@svc.method(writes=True)
def set_priority(ticket_id: int, priority: int) -> dict:
    """Set the priority (1 urgent .. 4 low) of a ticket that is not closed."""
    t = _open(ticket_id)
    if not 1 <= priority <= 4:
        raise CallError(f"priority must be 1..4, not {priority}")
    t["priority"] = priority
    return t


if __name__ == "__main__":
    svc.serve()
