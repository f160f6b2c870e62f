"""The local substrate's reader of a Plan's remote run (``substrates/local/remote.py``),
against a real HTTP server on loopback that keeps runs as a job API does: what it answered
is reported as it is, a run it does not know is "not found", no answer is no news, a
submission is POSTed once asked for, and nothing but http on loopback is ever asked."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kubemill.frameworks import RemoteReport, RemoteRun, RemoteVerdict
from kubemill.substrates.local.remote import RemoteWatch


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
def service() -> Iterator[str]:
    _Runs.runs = {}
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Runs)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _remote(base: str, run: str = "r1") -> RemoteRun:
    return RemoteRun(
        status_url=f"{base}/runs/{run}",
        after="head",
        verdict=lambda report: RemoteVerdict("waiting"),
        submit_url=f"{base}/runs/",
        submit_body={"id": run, "entrypoint": "python -c 'print(1)'"},
    )


def test_a_run_is_reported_as_the_api_answered_it(service: str) -> None:
    watch = RemoteWatch(_remote(service), interval=0)
    assert watch.poll(0, service_up=False) is None  # the service is not up: not asked
    assert watch.poll(1, service_up=True) == RemoteReport(found=False)
    assert watch.submit() is None
    report = watch.poll(2, service_up=True)
    assert report is not None and report.found
    assert report.body["status"] == "RUNNING"
    assert report.body["entrypoint"] == "python -c 'print(1)'"


def test_a_refused_submission_names_the_services_words(service: str) -> None:
    watch = RemoteWatch(_remote(service), interval=0)
    assert watch.submit() is None
    failed = watch.submit()
    assert failed is not None and "409" in failed and "r1 exists" in failed


def test_no_answer_is_no_news_and_the_rate_is_bounded(service: str) -> None:
    watch = RemoteWatch(_remote(service), interval=10)
    assert watch.poll(0, service_up=True) == RemoteReport(found=False)
    assert watch.submit() is None  # a submission asks again at once
    assert watch.poll(1, service_up=True) is not None
    _Runs.runs["r1"]["status"] = "SUCCEEDED"
    before = watch.poll(2, service_up=True)  # within the interval: the last report
    assert before is not None and before.body["status"] == "RUNNING"
    gone = RemoteWatch(_remote("http://127.0.0.1:9"), interval=0)  # nothing listens there
    assert gone.poll(0, service_up=True) is None


@pytest.mark.parametrize(
    "url", ["http://10.0.0.1:8265/api/jobs/x", "https://127.0.0.1/x", "file:///etc/passwd"]
)
def test_only_http_on_loopback_is_asked(url: str) -> None:
    remote = RemoteRun(
        status_url=url, after="head", verdict=lambda r: RemoteVerdict("waiting"), submit_url=url
    )
    watch = RemoteWatch(remote, interval=0)
    assert watch.poll(0, service_up=True) is None
    failed = watch.submit()
    assert failed is not None and "not http on loopback" in failed
