"""The reader of a Plan's remote run every substrate uses (``substrates/remote.py``) and the
local substrate's use of it (``substrates/local/remote.py``), against a real HTTP server on
loopback that keeps runs as a job API does: what it answered is reported as it is, a run it
does not know is "not found", no answer is no news, a submission is POSTed once asked for,
the rate is bounded, and the local reader asks only once the service is up, on loopback."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kubemill.core import ObservedPod
from kubemill.frameworks import RemoteReport, RemoteRun, RemoteVerdict
from kubemill.substrates.local.remote import LocalRemote
from kubemill.substrates.remote import RemoteWatch


class _Runs(BaseHTTPRequestHandler):
    """``GET /runs/<id>`` -> the run or 404; ``POST /runs/`` stores one (409 if known)."""

    runs: dict[str, dict[str, object]] = {}

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _answer(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        run = self.runs.get(self.path.removeprefix("/runs/"))
        self._answer(200 if run else 404, run or {"error": "not found"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body["id"] in self.runs:
            self._answer(409, {"error": f"{body['id']} exists"})
            return
        self.runs[body["id"]] = {"status": "RUNNING", **body}
        self._answer(200, {"id": body["id"]})


@pytest.fixture
def service() -> Iterator[int]:
    """The port of a job API on loopback."""
    _Runs.runs = {}
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Runs)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _remote(port: int, run: str = "r1") -> RemoteRun:
    return RemoteRun(
        after="head",
        port=port,
        status_path=f"/runs/{run}",
        verdict=lambda report: RemoteVerdict("waiting"),
        submit_path="/runs/",
        submit_body={"id": run, "entrypoint": "python -c 'print(1)'"},
    )


HOST = "127.0.0.1"


def test_a_run_is_reported_as_the_api_answered_it(service: int) -> None:
    watch = RemoteWatch(_remote(service), interval=0)
    assert watch.ask_status(HOST) == RemoteReport(found=False)
    assert watch.submit(HOST) is None
    report = watch.ask_status(HOST)
    assert report is not None and report.found
    assert report.body["status"] == "RUNNING"
    assert report.body["entrypoint"] == "python -c 'print(1)'"


def test_a_refused_submission_names_the_services_words(service: int) -> None:
    watch = RemoteWatch(_remote(service), interval=0)
    assert watch.submit(HOST) is None
    failed = watch.submit(HOST)
    assert failed is not None and "409" in failed and "r1 exists" in failed


def test_no_answer_is_no_news_and_the_rate_is_bounded(service: int) -> None:
    watch = RemoteWatch(_remote(service), interval=10)
    assert watch.due(0) and not watch.due(5)  # within the interval: not again
    assert watch.ask_status(HOST) == RemoteReport(found=False)
    assert watch.submit(HOST) is None
    assert watch.due(6)  # a submission asks again at once
    assert watch.due(16) and not watch.due(17)
    gone = RemoteWatch(_remote(9), interval=0)  # nothing listens on port 9
    assert gone.ask_status(HOST) is None
    failed = gone.submit(HOST)
    assert failed is not None and "127.0.0.1:9" in failed


def _head(*, ready: bool) -> tuple[ObservedPod, ...]:
    return (ObservedPod(name="head", replica_type="Head", index=0, phase="Running", ready=ready),)


def test_locally_the_service_is_asked_on_loopback_once_it_is_up(service: int) -> None:
    local = LocalRemote(RemoteWatch(_remote(service), interval=0))
    assert local.read(_head(ready=False)) is None  # the service is not up: not asked
    assert local.read(_head(ready=True)) == RemoteReport(found=False)
    assert local.submit() is None
    report = local.read(_head(ready=True))
    assert report is not None and report.body["status"] == "RUNNING"
    _Runs.runs["r1"]["status"] = "SUCCEEDED"
    # Not up any more: the last report stands, nothing is asked.
    last = local.read(_head(ready=False))
    assert last is not None and last.body["status"] == "RUNNING"
