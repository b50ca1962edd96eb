"""A tiny in-memory key-value store over HTTP (the database service of the .yml compose task)."""
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DATA = {"shelf_a": "41", "shelf_b": "17"}


class Handler(BaseHTTPRequestHandler):
    def _reply(self, code: int, body: str = "") -> None:
        self.send_response(code)
        self.end_headers()
        self.wfile.write(body.encode())

    def do_GET(self) -> None:
        if self.path == "/health":
            return self._reply(200, "ok")
        key = self.path.removeprefix("/kv/")
        return self._reply(200, DATA[key]) if key in DATA else self._reply(404)

    def do_PUT(self) -> None:
        DATA[self.path.removeprefix("/kv/")] = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        self._reply(204)


ThreadingHTTPServer(("0.0.0.0", 8080), Handler).serve_forever()
