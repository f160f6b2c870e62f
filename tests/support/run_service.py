"""A job service's run API on loopback, as the remote-run tests ask it (the shape of Ray's
job API, reduced): ``GET /runs/<id>`` answers the run or 404, ``POST /runs/`` stores one
(409 if it is known); with :data:`RunService.token` set, only with that bearer token.
:data:`RunService.runs` is what it holds, for a test to change."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JsonHandler(BaseHTTPRequestHandler):
    """A fake service's handler that answers JSON and logs nothing."""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _answer(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class RunService(JsonHandler):
    """``GET /runs/<id>`` -> the run or 404; ``POST /runs/`` stores one (409 if known)."""

    runs: dict[str, dict[str, object]] = {}
    token: str | None = None
    """When set, a request without ``Authorization: Bearer <token>`` is refused (401)."""

    def _refused(self) -> bool:
        if self.token is None or self.headers.get("Authorization") == f"Bearer {self.token}":
            return False
        self._answer(401, {"error": "Unauthorized: Missing authentication token"})
        return True

    def do_GET(self) -> None:
        if self._refused():
            return
        run = self.runs.get(self.path.removeprefix("/runs/"))
        self._answer(200 if run else 404, run or {"error": "not found"})

    def do_POST(self) -> None:
        if self._refused():
            return
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body["id"] in self.runs:
            self._answer(409, {"error": f"{body['id']} exists"})
            return
        self.runs[body["id"]] = {"status": "RUNNING", **body}
        self._answer(200, {"id": body["id"]})


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[int]:
    """The port ``handler`` serves on at 127.0.0.1 (a thread of its own), until the block
    ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextmanager
def serving_runs() -> Iterator[int]:
    """The port of a fresh :class:`RunService` on 127.0.0.1, served until the block ends."""
    RunService.runs, RunService.token = {}, None
    with serving(RunService) as port:
        yield port
