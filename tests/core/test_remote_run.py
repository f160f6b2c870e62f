"""The core judges a remote run (``Plan.remote``) by what its service's API reported.

A Plan that hands its program to a service it brings up (a Ray job on the job's head) is
decided by that service's report, read through the Plan's own ``verdict``; the replicas'
success policy decides nothing, a replica failing for good before the run ended still
fails the job, and the core asks the substrate to submit the run once the service is up
and does not know it. Plans are built by hand (corekit), with a verdict rule of the test's.
"""

from __future__ import annotations

from dataclasses import replace

from corekit import at, non_events, plan_for, pod, tfjob

from kubemill.api import ConditionType, Job
from kubemill.core import (
    Observed,
    ObservedPod,
    ReconcileOptions,
    ReconcileResult,
    SubmitRemote,
    reconcile,
)
from kubemill.frameworks import Plan, RemoteReport, RemoteRun, RemoteVerdict
from kubemill.kinds import lifecycle_for


def _verdict(report: RemoteReport) -> RemoteVerdict:
    """The test service's words: ``state`` DONE or BROKEN (with ``why``), else running."""
    if not report.found:
        return RemoteVerdict("waiting")
    state = report.body.get("state")
    if state == "DONE":
        return RemoteVerdict("succeeded")
    if state == "BROKEN":
        return RemoteVerdict("failed", reason="AppFailed", message=str(report.body.get("why")))
    return RemoteVerdict("running")


def _plan(*, submit: bool) -> tuple[Job, Plan]:
    job = tfjob(workers=2)
    plan = plan_for(job)
    head = plan.replicas[0].name
    remote = RemoteRun(
        after=head,
        port=8000,
        status_path="/api/runs/r1",
        verdict=_verdict,
        submit_path="/api/runs/" if submit else "",
        submit_body={"id": "r1"} if submit else {},
    )
    return job, replace(plan, remote=remote)


def _pass(job: Job, plan: Plan, observed: Observed, seconds: float = 10) -> ReconcileResult:
    return reconcile(
        job,
        plan,
        observed,
        at(seconds),
        options=ReconcileOptions(),
        lifecycle=lifecycle_for(plan.kind),
    )


def _running(plan: Plan, *, ready: bool = True) -> tuple[ObservedPod, ...]:
    return tuple(replace(pod(plan, f"worker-{r.index}"), ready=ready) for r in plan.replicas)


def test_the_services_success_is_the_jobs_and_replica_successes_decide_nothing() -> None:
    job, plan = _plan(submit=False)
    # Every replica exited 0, as a success policy would count it: not a verdict here.
    done = tuple(pod(plan, f"worker-{r.index}", "Succeeded", finished=5) for r in plan.replicas)
    result = _pass(job, plan, Observed(pods=done, remote=RemoteReport(True, {"state": "RUN"})))
    assert not result.status.finished

    result = _pass(
        job, plan, Observed(pods=_running(plan), remote=RemoteReport(True, {"state": "DONE"}))
    )
    assert result.status.is_true(ConditionType.SUCCEEDED)


def test_the_services_failure_fails_the_job_with_its_reason_and_words() -> None:
    job, plan = _plan(submit=False)
    report = RemoteReport(True, {"state": "BROKEN", "why": "ValueError: no"})
    result = _pass(job, plan, Observed(pods=_running(plan), remote=report))
    failed = result.status.condition(ConditionType.FAILED)
    assert failed is not None and failed.status == "True"
    assert failed.reason == "AppFailed"
    assert "ValueError: no" in failed.message


def test_a_replica_failing_for_good_before_the_run_ended_fails_the_job() -> None:
    job, plan = _plan(submit=False)
    pods = (pod(plan, "worker-0"), pod(plan, "worker-1", "Failed", exit_code=1, finished=3))
    result = _pass(job, plan, Observed(pods=pods, remote=RemoteReport(True, {"state": "RUN"})))
    assert result.status.is_true(ConditionType.FAILED)


def test_no_report_yet_decides_nothing() -> None:
    job, plan = _plan(submit=False)
    result = _pass(job, plan, Observed(pods=_running(plan)))
    assert not result.status.finished


def test_the_core_asks_for_a_submission_only_once_the_service_is_up_and_does_not_know_it() -> None:
    job, plan = _plan(submit=True)
    unknown = RemoteReport(False)
    assert (
        SubmitRemote()
        not in _pass(job, plan, Observed(pods=_running(plan, ready=False), remote=unknown)).actions
    )
    assert SubmitRemote() not in _pass(job, plan, Observed(pods=_running(plan))).actions
    assert SubmitRemote() in _pass(job, plan, Observed(pods=_running(plan), remote=unknown)).actions
    known = RemoteReport(True, {"state": "RUN"})
    assert (
        SubmitRemote() not in _pass(job, plan, Observed(pods=_running(plan), remote=known)).actions
    )


def test_a_replica_submitter_plan_never_asks_the_substrate_to_submit() -> None:
    job, plan = _plan(submit=False)
    actions = _pass(job, plan, Observed(pods=_running(plan), remote=RemoteReport(False))).actions
    assert not any(isinstance(a, SubmitRemote) for a in non_events(actions))
