"""Support case console: list and search cases, open one, assign it, add notes, change status.

State lives in state.json next to this file and is rewritten (atomically) on every save.
"""

import html
import json
import os
import re
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Lock

STATE = Path(__file__).with_name("state.json")
LOCK = Lock()
STATUSES = ["open", "pending", "resolved"]
PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>{title} - Helpdesk</title></head>
<body><nav><a href="/cases" id="nav-cases">All cases</a></nav><h1>{title}</h1>{body}</body></html>"""


def load() -> dict:
    return json.loads(STATE.read_text())


def save(state: dict) -> None:
    tmp = STATE.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    os.replace(tmp, STATE)


def esc(value) -> str:
    return html.escape(str(value))


def agent_name(state: dict, agent_id: str) -> str:
    return next((a["name"] for a in state["agents"] if a["id"] == agent_id), "Unassigned")


def list_page(state: dict, query: str) -> str:
    q = query.strip().lower()
    rows = [c for c in state["cases"]
            if not q or any(q in str(c[k]).lower() for k in ("id", "subject", "customer", "order"))]
    body = [f'<form method="get" action="/cases"><label for="q">Search</label>'
            f'<input id="q" name="q" value="{esc(query)}"><button id="search" type="submit">Search</button></form>',
            f"<p>{len(rows)} case(s)</p><table><tr><th>Case</th><th>Subject</th><th>Customer</th>"
            "<th>Status</th><th>Assignee</th></tr>"]
    for c in rows:
        body.append(f'<tr><td><a class="case" href="/cases/{esc(c["id"])}">{esc(c["id"])}</a></td>'
                    f'<td>{esc(c["subject"])}</td><td>{esc(c["customer"])}</td><td>{esc(c["status"])}</td>'
                    f'<td>{esc(agent_name(state, c["assignee"]))}</td></tr>')
    body.append("</table>")
    return PAGE.format(title="Cases", body="".join(body))


def case_page(state: dict, case: dict, message: str = "", error: str = "", form: dict | None = None) -> str:
    form = form or {}
    assignee = form.get("assignee", case["assignee"])
    status = form.get("status", case["status"])
    agents = [{"id": "", "name": "Unassigned"}, *state["agents"]]
    options = "".join(f'<option value="{esc(a["id"])}"{" selected" if a["id"] == assignee else ""}>'
                      f'{esc(a["name"])}{" (" + esc(a["team"]) + ")" if a.get("team") else ""}</option>'
                      for a in agents)
    statuses = "".join(f'<option value="{s}"{" selected" if s == status else ""}>{s.title()}</option>'
                       for s in STATUSES)
    notes = "".join(f"<li><b>{esc(n['author'])}</b>: {esc(n['text'])}</li>" for n in case["notes"]) or "<li>none</li>"
    body = (
        (f'<p class="message">{esc(message)}</p>' if message else "")
        + (f'<p class="error">{esc(error)}</p>' if error else "")
        + f'<dl><dt>Customer</dt><dd>{esc(case["customer"])}</dd><dt>Order</dt><dd>{esc(case["order"])}</dd>'
        f'<dt>Status</dt><dd>{esc(case["status"])}</dd>'
        f'<dt>Assignee</dt><dd>{esc(agent_name(state, case["assignee"]))}</dd>'
        f'</dl><p>{esc(case["description"])}</p><h2>Notes</h2><ul>{notes}</ul>'
        f'<form method="post" action="/cases/{esc(case["id"])}">'
        f'<label for="assignee">Assignee</label><select id="assignee" name="assignee">{options}</select>'
        f'<label for="status">Status</label><select id="status" name="status">{statuses}</select>'
        f'<label for="note">Add note</label><textarea id="note" name="note">{esc(form.get("note", ""))}</textarea>'
        '<button id="save" type="submit">Save case</button></form>'
    )
    return PAGE.format(title=f'{esc(case["id"])}: {esc(case["subject"])}', body=body)


def update(state: dict, case: dict, form: dict) -> str:
    """Apply the form to ``case``; an error message (and no change) if it is invalid."""
    assignee, status, note = form.get("assignee", ""), form.get("status", ""), form.get("note", "").strip()
    if assignee and assignee not in {a["id"] for a in state["agents"]}:
        return "Unknown assignee."
    if status not in STATUSES:
        return "Unknown status."
    if status == "resolved" and not assignee:
        return "A resolved case must have an assignee."
    if status == "resolved" and case["status"] != "resolved" and not note:
        return "Add a note explaining the resolution before resolving a case."
    case["assignee"], case["status"] = assignee, status
    if note:
        case["notes"].append({"author": agent_name(state, assignee) if assignee else "Helpdesk", "text": note})
    return ""


class Handler(BaseHTTPRequestHandler):
    def send_page(self, text: str, code: int = 200) -> None:
        data = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def redirect(self, where: str) -> None:
        self.send_response(303)
        self.send_header("Location", where)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def find(self, state: dict, path: str) -> dict | None:
        m = re.fullmatch(r"/cases/([A-Z]+-\d+)", path)
        return next((c for c in state["cases"] if m and c["id"] == m.group(1)), None)

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        params = dict(urllib.parse.parse_qsl(url.query))
        state = load()
        if url.path in ("/", "/cases"):
            return self.send_page(list_page(state, params.get("q", "")))
        case = self.find(state, url.path)
        if case is None:
            return self.send_page(PAGE.format(title="Not found", body="<p>No such page.</p>"), 404)
        self.send_page(case_page(state, case, message="Case saved." if params.get("saved") else ""))

    def do_POST(self) -> None:
        size = int(self.headers.get("Content-Length") or 0)
        form = dict(urllib.parse.parse_qsl(self.rfile.read(size).decode(), keep_blank_values=True))
        with LOCK:
            state = load()
            case = self.find(state, urllib.parse.urlsplit(self.path).path)
            if case is None:
                return self.send_page(PAGE.format(title="Not found", body="<p>No such case.</p>"), 404)
            if error := update(state, case, form):
                return self.send_page(case_page(state, case, error=error, form=form), 400)
            save(state)
        self.redirect(f"/cases/{case['id']}?saved=1")

    def log_message(self, fmt: str, *args) -> None:
        print(fmt % args, flush=True)


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", 8000), Handler).serve_forever()
