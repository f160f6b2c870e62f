"""The reader of a Plan's remote run every substrate uses (``substrates/remote.py``) and the
local substrate's use of it (``substrates/local/remote.py``), against a real HTTP server on
loopback that keeps runs as a job API does: what it answered is reported as it is, a run it
does not know is "not found", no answer is no news, a submission is POSTed once asked for,
the rate is bounded, and the local reader asks only once the service is up, on loopback;
each report names the head pod that answered, and another head drops the last one's."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest

from kubemill.core import ObservedPod
from kubemill.frameworks import RemoteReport, RemoteRun, RemoteVerdict, SecretFile
from kubemill.substrates.local.remote import LocalRemote, read_secret
from kubemill.substrates.remote import RemoteWatch
from support.run_service import RunService, serving_runs


@pytest.fixture
def service() -> Iterator[int]:
    """The port of a job API on loopback."""
    with serving_runs() as port:
        yield port


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
    RunService.runs["r1"]["status"] = "SUCCEEDED"
    # Not up any more: the last report stands, nothing is asked.
    last = local.read(_head(ready=False))
    assert last is not None and last.body["status"] == "RUNNING"


def test_a_service_that_wants_a_token_is_sent_the_generated_one(
    service: int, tmp_path: Path
) -> None:
    # The token is a file of the job's secret set, read at each request: none before the
    # supervisor has written it (refused: no news, and the submission fails with the words).
    RunService.token = "0123abcd"
    secret = SecretFile("job-token", "token")
    credential = partial(read_secret, tmp_path, secret)
    watch = RemoteWatch(_remote(service), interval=0, credential=credential)
    assert watch.ask_status(HOST) is None
    refused = watch.submit(HOST)
    assert refused is not None and "401" in refused and "Missing authentication" in refused
    (tmp_path / "job-token").mkdir()
    (tmp_path / "job-token" / "token").write_text("0123abcd\n", encoding="utf-8")
    assert watch.ask_status(HOST) == RemoteReport(found=False)
    assert watch.submit(HOST) is None
    report = watch.ask_status(HOST)
    assert report is not None and report.body["status"] == "RUNNING"
    # A wrong token is refused as none is: the last report stands.
    (tmp_path / "job-token" / "token").write_text("ffff", encoding="utf-8")
    RunService.runs["r1"]["status"] = "SUCCEEDED"
    assert watch.ask_status(HOST) == report


def test_a_report_names_the_head_that_answered_and_another_head_drops_it(service: int) -> None:
    local = LocalRemote(RemoteWatch(_remote(service), interval=0))
    old = (replace(_head(ready=True)[0], uid="head@1"),)
    RunService.runs["r1"] = {"status": "FAILED"}
    assert local.read(old) == RemoteReport(True, {"status": "FAILED"}, source="head@1")
    # The old head gone: not asked, its report kept (the core judges it stale).
    assert local.read(()) == RemoteReport(True, {"status": "FAILED"}, source="head@1")
    # A new head that gives no answer yet: what the old one said is dropped all the same.
    gone = LocalRemote(RemoteWatch(replace(_remote(service), port=9), interval=0))
    gone.watch.report = RemoteReport(True, {"status": "FAILED"}, source="head@1")
    assert gone.read((replace(old[0], uid="head@2"),)) is None
    del RunService.runs["r1"]
    new = (replace(old[0], uid="head@2"),)
    assert local.read(new) == RemoteReport(found=False, source="head@2")
