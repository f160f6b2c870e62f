"""The operator's reader of remote runs (``operator/remote.py``), against a real job API on
loopback: the service is asked only once the run's ``after`` pod is Running and ready with
an IP, and at that IP; the core's ``SubmitRemote`` is carried out there and taken out of the
pass's actions (a refusal posts ``FailedSubmission``); the job is looked at again every
interval while its run is followed, and no longer once it has finished or its service is
down."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator, Mapping
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from kubemill.api import Condition, ConditionType, JobStatus
from kubemill.core import Observed, ReconcileResult, SubmitRemote
from kubemill.frameworks import Plan, RemoteReport, RemoteRun, RemoteVerdict
from kubemill.frameworks.plan import decided_by
from kubemill.substrates.kubernetes.observe import PodSnapshot
from kubemill.substrates.kubernetes.operator.remote import RemoteRuns

KEY = ("kubemill.dev", "things", "ns", "job")
OUTCOME = decided_by("Head")


class _Runs(BaseHTTPRequestHandler):
    """``GET /runs/r1`` -> the run or 404; ``POST /runs/`` stores it (409 once known)."""

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
        self.runs[body["id"]] = {"status": "RUNNING"}
        self._answer(200, {"id": body["id"]})


@pytest.fixture
def port() -> Iterator[int]:
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


def _plan(port: int) -> Plan:
    remote = RemoteRun(
        after="job-head-0",
        port=port,
        status_path="/runs/r1",
        verdict=lambda report: RemoteVerdict("waiting"),
        submit_path="/runs/",
        submit_body={"id": "r1"},
    )
    return Plan(
        kind="Thing", name="job", namespace="ns", replicas=(), outcome=OUTCOME, remote=remote
    )


def _head(*, ready: bool = True, ip: str = "127.0.0.1") -> list[PodSnapshot]:
    return [
        PodSnapshot(
            name="job-head-0",
            uid="u",
            owner_uid="j",
            replica_type="head",
            index=0,
            phase="Running",
            ready=ready,
            pod_ip=ip,
        )
    ]


def _result(*, submit: bool = False, finished: bool = False) -> ReconcileResult:
    status = JobStatus()
    if finished:
        status.conditions.append(Condition(type=ConditionType.SUCCEEDED, status="True"))
    return ReconcileResult(actions=(SubmitRemote(),) if submit else (), status=status)


def test_the_service_is_asked_at_the_after_pods_ip_once_it_is_up(port: int) -> None:
    events: list[tuple[str, str, str]] = []

    def post(raw: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        events.append((type_, reason, message))

    runs = RemoteRuns(post, interval=0)
    plan = _plan(port)

    async def scenario() -> None:
        # Not ready, or no IP yet: not asked, nothing known, not followed.
        for pods in (_head(ready=False), _head(ip="")):
            observed = await runs.observe(KEY, plan, pods, Observed())
            assert observed.remote is None
            assert runs.requeue(KEY, _result()) is None
        observed = await runs.observe(KEY, plan, _head(), Observed())
        assert observed.remote == RemoteReport(found=False)
        assert runs.requeue(KEY, _result()) == 0  # followed: again after the interval
        # The core asks for the submission: POSTed, and gone from what the pass applies.
        done = await runs.submit(KEY, {}, _result(submit=True))
        assert done.actions == ()
        assert _Runs.runs == {"r1": {"status": "RUNNING"}}
        observed = await runs.observe(KEY, plan, _head(), Observed())
        assert observed.remote is not None and observed.remote.body == {"status": "RUNNING"}
        # Asked again while the service knows it: refused, and the refusal is an event.
        await runs.submit(KEY, {}, _result(submit=True))
        assert events and events[0][:2] == ("Warning", "FailedSubmission")
        assert "409" in events[0][2] and "r1 exists" in events[0][2]
        # Finished: no longer followed; the core's own requeue stands (a second more).
        assert runs.requeue(KEY, _result(finished=True)) is None
        timed = ReconcileResult(actions=(), status=JobStatus(), requeue_after=timedelta(0))
        assert runs.requeue(KEY, timed) == 0  # min(1 s, the interval)
        # The head down: the last report stands, nothing is asked.
        _Runs.runs["r1"]["status"] = "SUCCEEDED"
        observed = await runs.observe(KEY, plan, _head(ready=False), Observed())
        assert observed.remote is not None and observed.remote.body == {"status": "RUNNING"}
        assert runs.requeue(KEY, _result()) is None

    asyncio.run(scenario())


def test_a_plan_without_a_remote_run_is_left_as_observed(port: int) -> None:
    runs = RemoteRuns(lambda *args: None, interval=0)
    plan = Plan(kind="Thing", name="job", namespace="ns", replicas=(), outcome=OUTCOME)
    observed = Observed()

    async def scenario() -> None:
        assert await runs.observe(KEY, plan, _head(), observed) is observed
        assert await runs.submit(KEY, {}, _result()) == _result()

    asyncio.run(scenario())
    assert runs.requeue(KEY, _result()) is None
