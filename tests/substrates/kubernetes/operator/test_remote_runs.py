"""The operator's reader of remote runs (``operator/remote.py``), against a real job API on
loopback: the service is asked only once the run's ``after`` pod is Running and ready with
an IP, and at that IP; the core's ``SubmitRemote`` is carried out there and taken out of the
pass's actions (a refusal posts ``FailedSubmission``); the job is looked at again every
interval while its run is followed, and no longer once it has finished or its service is
down. Each report names the head pod that answered; another head (a retry's new cluster)
drops what the last one said."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator, Mapping
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from kubemill.api import Condition, ConditionType, JobStatus
from kubemill.core import Observed, ReconcileResult, SubmitRemote
from kubemill.frameworks import Plan, RemoteReport, RemoteRun, RemoteVerdict, SecretFile
from kubemill.frameworks.plan import decided_by
from kubemill.substrates.kubernetes.observe import PodSnapshot
from kubemill.substrates.kubernetes.operator.remote import RemoteRuns
from support.run_service import RunService, serving_runs

KEY = ("kubemill.dev", "things", "ns", "job")
OUTCOME = decided_by("Head")


@pytest.fixture
def port() -> Iterator[int]:
    with serving_runs() as port:
        yield port


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


def _head(*, ready: bool = True, ip: str = "127.0.0.1", uid: str = "u") -> list[PodSnapshot]:
    return [
        PodSnapshot(
            name="job-head-0",
            uid=uid,
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
        assert observed.remote == RemoteReport(found=False, source="u")
        assert runs.requeue(KEY, _result()) == 0  # followed: again after the interval
        # The core asks for the submission: POSTed, and gone from what the pass applies.
        done = await runs.submit(KEY, {}, _result(submit=True))
        assert done.actions == ()
        assert RunService.runs["r1"]["status"] == "RUNNING"
        observed = await runs.observe(KEY, plan, _head(), Observed())
        assert observed.remote is not None and observed.remote.body == RunService.runs["r1"]
        # Asked again while the service knows it: refused, and the refusal is an event.
        await runs.submit(KEY, {}, _result(submit=True))
        assert events and events[0][:2] == ("Warning", "FailedSubmission")
        assert "409" in events[0][2] and "r1 exists" in events[0][2]
        # Finished: no longer followed; the core's own requeue stands (a second more).
        assert runs.requeue(KEY, _result(finished=True)) is None
        timed = ReconcileResult(actions=(), status=JobStatus(), requeue_after=timedelta(0))
        assert runs.requeue(KEY, timed) == 0  # min(1 s, the interval)
        # The head down: the last report stands, nothing is asked.
        RunService.runs["r1"]["status"] = "SUCCEEDED"
        observed = await runs.observe(KEY, plan, _head(ready=False), Observed())
        assert observed.remote is not None and observed.remote.body["status"] == "RUNNING"
        assert runs.requeue(KEY, _result()) is None

    asyncio.run(scenario())


def test_a_new_head_pod_drops_the_last_heads_report(port: int) -> None:
    runs = RemoteRuns(lambda *args: None, interval=0)
    plan = _plan(port)
    RunService.runs["r1"] = {"status": "FAILED"}

    async def scenario() -> None:
        observed = await runs.observe(KEY, plan, _head(), Observed())
        assert observed.remote == RemoteReport(found=True, body={"status": "FAILED"}, source="u")
        # The old head going (deleting, then gone): nothing asked, its report kept as is.
        observed = await runs.observe(KEY, plan, [], Observed())
        assert observed.remote is not None and observed.remote.source == "u"
        # A new head, whose service does not know the run: its own answer, nothing older.
        del RunService.runs["r1"]
        observed = await runs.observe(KEY, plan, _head(uid="v"), Observed())
        assert observed.remote == RemoteReport(found=False, source="v")

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


def test_a_run_wanting_a_bearer_token_is_asked_with_its_secrets_once_it_is_there(
    port: int,
) -> None:
    RunService.token = "s3cret"
    RunService.runs["r1"] = {"status": "RUNNING"}
    secrets: dict[str, dict[str, Any]] = {}
    reads: list[tuple[str, str]] = []

    async def read_secret(namespace: str, name: str) -> Mapping[str, Any]:
        reads.append((namespace, name))
        if name not in secrets:
            raise LookupError(name)  # not made yet
        return secrets[name]

    runs = RemoteRuns(lambda *args: None, interval=0, read_secret=read_secret)
    plan = _plan(port)
    assert plan.remote is not None
    plan = replace(
        plan, remote=replace(plan.remote, bearer_token=SecretFile("job-token", "auth_token"))
    )

    async def scenario() -> None:
        # No Secret yet: the service is not asked (it would refuse), nor followed.
        observed = await runs.observe(KEY, plan, _head(), Observed())
        assert observed.remote is None and runs.requeue(KEY, _result()) is None
        secrets["job-token"] = {"data": {"auth_token": base64.b64encode(b"s3cret\n").decode()}}
        observed = await runs.observe(KEY, plan, _head(), Observed())
        assert observed.remote == RemoteReport(found=True, body={"status": "RUNNING"}, source="u")
        # Read once, then kept for the job's reader; gone with the job.
        await runs.observe(KEY, plan, _head(), Observed())
        assert reads == [("ns", "job-token"), ("ns", "job-token")]
        runs.forget(KEY)
        await runs.observe(KEY, plan, _head(), Observed())
        assert len(reads) == 3

    asyncio.run(scenario())
