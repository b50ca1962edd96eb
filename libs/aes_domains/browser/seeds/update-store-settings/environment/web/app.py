"""Shop admin: a settings form validated on the server, and the change history it keeps.

State lives in state.json next to this file; a save either applies every field or, when
any field is invalid, changes nothing and shows the errors.
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
CURRENCIES = {"USD": "US dollar", "EUR": "Euro", "GBP": "Pound sterling"}
TIMEZONES = ["UTC", "Europe/London", "Europe/Berlin", "America/New_York"]
EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[a-z]{2,}")
PHONE = re.compile(r"\+[1-9]\d{7,14}")
TEXT = ("store_name", "support_email", "support_phone", "low_stock_threshold")
FLAGS = ("notify_orders", "notify_returns")
PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>{title} - Shop admin</title></head>
<body><nav><a href="/" id="nav-home">Dashboard</a> <a href="/settings" id="nav-settings">Settings</a>
<a href="/history" id="nav-history">History</a></nav><h1>{title}</h1>{body}</body></html>"""


def load() -> dict:
    return json.loads(STATE.read_text())


def save(state: dict) -> None:
    tmp = STATE.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    os.replace(tmp, STATE)


def esc(value) -> str:
    return html.escape(str(value))


def validate(form: dict) -> tuple[dict, list[str]]:
    """The settings ``form`` describes, and what is wrong with it."""
    errors = []
    new = {k: form.get(k, "").strip() for k in TEXT}
    new.update({k: k in form for k in FLAGS})
    new["currency"], new["timezone"] = form.get("currency", ""), form.get("timezone", "")
    if not new["store_name"]:
        errors.append("Store name is required.")
    if not EMAIL.fullmatch(new["support_email"]):
        errors.append("Support email must be a valid address.")
    if not PHONE.fullmatch(new["support_phone"]):
        errors.append("Support phone must be in international format: + and country code, digits only "
                      "(e.g. +14155550123).")
    try:
        threshold = int(new["low_stock_threshold"])
        if not 1 <= threshold <= 500:
            raise ValueError
        new["low_stock_threshold"] = threshold
    except ValueError:
        errors.append("Low-stock threshold must be a whole number from 1 to 500.")
    if new["currency"] not in CURRENCIES:
        errors.append("Unknown currency.")
    if new["timezone"] not in TIMEZONES:
        errors.append("Unknown time zone.")
    return new, errors


def settings_page(values: dict, errors: list[str] = (), message: str = "") -> str:
    def text(name: str, label: str) -> str:
        return (f'<label for="{name}">{label}</label>'
                f'<input id="{name}" name="{name}" type="text" value="{esc(values[name])}">')

    def flag(name: str, label: str) -> str:
        return (f'<input id="{name}" name="{name}" type="checkbox"{" checked" if values[name] else ""}>'
                f'<label for="{name}">{label}</label>')

    def menu(name: str, label: str, options: dict) -> str:
        opts = "".join(f'<option value="{esc(k)}"{" selected" if k == values[name] else ""}>{esc(v)}</option>'
                       for k, v in options.items())
        return f'<label for="{name}">{label}</label><select id="{name}" name="{name}">{opts}</select>'

    body = (
        (f'<p class="message">{esc(message)}</p>' if message else "")
        + "".join(f'<p class="error">{esc(e)}</p>' for e in errors)
        + '<form method="post" action="/settings"><fieldset><legend>Store</legend>'
        + text("store_name", "Store name") + menu("currency", "Currency", CURRENCIES)
        + menu("timezone", "Time zone", {t: t for t in TIMEZONES})
        + '</fieldset><fieldset><legend>Support</legend>'
        + text("support_email", "Support email") + text("support_phone", "Support phone")
        + '</fieldset><fieldset><legend>Inventory and notifications</legend>'
        + text("low_stock_threshold", "Low-stock alert threshold")
        + flag("notify_orders", "Email me about new orders") + flag("notify_returns", "Email me about returns")
        + '</fieldset><button id="save" type="submit">Save settings</button></form>'
    )
    return PAGE.format(title="Settings", body=body)


class Handler(BaseHTTPRequestHandler):
    def send_page(self, text: str, code: int = 200) -> None:
        data = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        state = load()
        if url.path == "/":
            s = state["settings"]
            body = (f'<p>{esc(s["store_name"])}: {len(state["history"])} settings change(s) recorded.</p>'
                    '<p><a href="/settings" id="edit-settings">Edit settings</a></p>')
            return self.send_page(PAGE.format(title="Dashboard", body=body))
        if url.path == "/settings":
            saved = "Settings saved." if "saved=1" in url.query else ""
            return self.send_page(settings_page(state["settings"], message=saved))
        if url.path == "/history":
            items = "".join(f"<li>{esc(h['field'])}: {esc(h['old'])} &rarr; {esc(h['new'])}</li>"
                            for h in state["history"]) or "<li>No changes yet.</li>"
            return self.send_page(PAGE.format(title="History", body=f"<ul>{items}</ul>"))
        self.send_page(PAGE.format(title="Not found", body="<p>No such page.</p>"), 404)

    def do_POST(self) -> None:
        if urllib.parse.urlsplit(self.path).path != "/settings":
            return self.send_page(PAGE.format(title="Not found", body="<p>No such page.</p>"), 404)
        size = int(self.headers.get("Content-Length") or 0)
        form = dict(urllib.parse.parse_qsl(self.rfile.read(size).decode(), keep_blank_values=True))
        with LOCK:
            state = load()
            new, errors = validate(form)
            if errors:
                # Shown as submitted, so the errors point at what the user typed.
                shown = {**state["settings"], **{k: form.get(k, "") for k in TEXT}, **{k: k in form for k in FLAGS},
                         **{k: form[k] for k in ("currency", "timezone") if k in form}}
                return self.send_page(settings_page(shown, errors), 400)
            old = state["settings"]
            state["history"] += [{"field": k, "old": old[k], "new": v} for k, v in new.items() if old[k] != v]
            state["settings"] = new
            save(state)
        self.send_response(303)
        self.send_header("Location", "/settings?saved=1")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, fmt: str, *args) -> None:
        print(fmt % args, flush=True)


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", 8000), Handler).serve_forever()
