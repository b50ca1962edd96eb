"""notes-api: a tiny HTTP service storing text notes on disk.

Reads its configuration from $NOTES_CONFIG (default /srv/notes-api/config.ini):

    [server]   host, port
    [storage]  data_dir (existing writable directory), max_note_bytes (positive integer)
    [auth]     token_file (file holding the bearer token; must not be readable by group or others)

Endpoints: GET /health; POST /notes (Authorization: Bearer <token>, body = note text) -> 201 {"id": ...};
GET /notes/<id> -> the note text.
"""

import configparser
import json
import os
import stat
import sys
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REQUIRED = {"server": {"host", "port"}, "storage": {"data_dir", "max_note_bytes"}, "auth": {"token_file"}}


def load_config(path):
    parser = configparser.ConfigParser()
    if not parser.read(path):
        sys.exit(f"config file not found: {path}")
    unknown = set(parser.sections()) - set(REQUIRED)
    if unknown:
        sys.exit(f"unknown config sections: {sorted(unknown)}")
    for section, keys in REQUIRED.items():
        if section not in parser:
            sys.exit(f"missing config section [{section}]")
        missing = keys - set(parser[section])
        if missing:
            sys.exit(f"missing keys in [{section}]: {sorted(missing)}")
    try:
        port = parser.getint("server", "port")
        limit = parser.getint("storage", "max_note_bytes")
    except ValueError as exc:
        sys.exit(f"bad number in config: {exc}")
    if limit <= 0:
        sys.exit("max_note_bytes must be positive")
    return {"host": parser["server"]["host"], "port": port, "data_dir": parser["storage"]["data_dir"],
            "max_note_bytes": limit, "token_file": parser["auth"]["token_file"]}


def health_problems(cfg):
    problems = []
    if not os.path.isdir(cfg["data_dir"]) or not os.access(cfg["data_dir"], os.W_OK):
        problems.append("data_dir is not a writable directory")
    try:
        st = os.stat(cfg["token_file"])
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            problems.append("token_file is accessible by group or others")
        elif not open(cfg["token_file"]).read().strip():
            problems.append("token_file is empty")
    except OSError:
        problems.append("token_file is missing")
    return problems


def make_handler(cfg):
    class Handler(BaseHTTPRequestHandler):
        def reply(self, code, payload):
            body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/health":
                problems = health_problems(cfg)
                return self.reply(503 if problems else 200, {"status": "ok" if not problems else "unhealthy",
                                                             "problems": problems})
            if self.path.startswith("/notes/"):
                note_id = self.path.rsplit("/", 1)[1]
                path = os.path.join(cfg["data_dir"], f"{note_id}.txt")
                if note_id.isalnum() and os.path.isfile(path):
                    return self.reply(200, open(path, "rb").read())
            self.reply(404, {"error": "not found"})

        def do_POST(self):
            if self.path != "/notes":
                return self.reply(404, {"error": "not found"})
            token = open(cfg["token_file"]).read().strip()
            if self.headers.get("Authorization") != f"Bearer {token}":
                return self.reply(401, {"error": "unauthorized"})
            size = int(self.headers.get("Content-Length", 0))
            if size > cfg["max_note_bytes"]:
                return self.reply(413, {"error": "note too large"})
            note_id = uuid.uuid4().hex
            with open(os.path.join(cfg["data_dir"], f"{note_id}.txt"), "wb") as f:
                f.write(self.rfile.read(size))
            self.reply(201, {"id": note_id})

        def log_message(self, *args):
            pass

    return Handler


def main():
    cfg = load_config(os.environ.get("NOTES_CONFIG", "/srv/notes-api/config.ini"))
    ThreadingHTTPServer((cfg["host"], cfg["port"]), make_handler(cfg)).serve_forever()


if __name__ == "__main__":
    main()
