"""The core retries a whole run (``Plan.retry``): a failed attempt's pods all go and the job
is created afresh, up to the limit, every attempt counted (``StatusView.attempts``).

What is retried: the remote run's failure (unless its verdict says it is not retryable)
and a replica run through a child controller failing for good; a deadline is not. The
failed attempt's report is never judged again: the core judges only the report of the
``after`` replica's live pod. A child controller starts each attempt, and each resumed
run, with its full backoff limit. Plans are built by hand (corekit): the Chief is the
service (``after``), the PS runs through a child controller (a submitter), a status
extension of the test's keeps the attempts between passes as a kind's status would.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from corekit import FakeSubstrate, at, events, non_events, plan_for, step, tfjob, with_status

from kubemill.api import ConditionType, Job, JobStatus, ReplicaStatus
from kubemill.core import DeletePod, ReconcileOptions, reconcile
from kubemill.frameworks import (
    Attempts,
    ChildController,
    Plan,
    RemoteReport,
    RemoteRun,
    RemoteVerdict,
    RunRetry,
    StatusView,
)
from kubemill.kinds import lifecycle_for

CONTROLLER = ChildController(name="x-runner", backoff_limit=1, failure_reason="RunnerFailed")


def _verdict(report: RemoteReport) -> RemoteVerdict:
    """The test service's words: DONE, BROKEN (with ``why``), HALTED (stopped on purpose)."""
    if not report.found:
        return RemoteVerdict("waiting")
    state = report.body.get("state")
    if state == "DONE":
        return RemoteVerdict("succeeded")
    if state in ("BROKEN", "HALTED"):
        why = str(report.body.get("why"))
        return RemoteVerdict("failed", reason="AppFailed", message=why, retryable=state == "BROKEN")
    return RemoteVerdict("running")


@dataclass
class Books:
    """The kind's status as far as the attempts go: written by the extension, read back."""

    attempts: Attempts = field(default_factory=Attempts)
    seen: list[Attempts] = field(default_factory=list)

    def read(self, status: JobStatus) -> Attempts:
        del status
        return self.attempts

    def extension(self, view: StatusView) -> dict[str, Any]:
        assert view.attempts is not None
        self.attempts = view.attempts
        self.seen.append(view.attempts)
        return {}


def _job(**run_policy: Any) -> Job:
    return tfjob(chief=1, ps=1, workers=1, restart="OnFailure", run_policy=run_policy or None)


def _setup(limit: int, **run_policy: Any) -> tuple[Job, Plan, Books]:
    job = _job(**run_policy)
    plan = plan_for(job)
    head = plan.of_type("Chief")[0].name
    books = Books()
    replicas = tuple(
        replace(rep, controller=CONTROLLER) if rep.replica_type == "PS" else rep
        for rep in plan.replicas
    )
    remote = RemoteRun(after=head, port=8000, status_path="/runs/r1", verdict=_verdict)
    return (
        job,
        replace(
            plan,
            replicas=replicas,
            remote=remote,
            retry=RunRetry(limit=limit, recorded=books.read),
            status_extension=books.extension,
        ),
        books,
    )


def _up(substrate: FakeSubstrate) -> str:
    """Every pod Running and ready; the head's uid (what a report from it names)."""
    for name, pod in substrate.pods.items():
        substrate.pods[name] = replace(pod, phase="Running", ready=True)
    head = substrate.plan.of_type("Chief")[0].name
    return substrate.pods[head].uid


def _report(
    substrate: FakeSubstrate, job: Job, plan: Plan, seconds: float, body: dict[str, Any], uid: str
) -> tuple[Job, Any]:
    """One pass with the service's report, as a substrate that asked the head ``uid``."""
    observed = replace(substrate.observed(), remote=RemoteReport(True, body, source=uid))
    result = reconcile(
        job,
        plan,
        observed,
        at(seconds),
        options=ReconcileOptions(),
        lifecycle=lifecycle_for("TFJob"),
    )
    substrate.apply(result.actions)
    return with_status(job, result.status), result


def _start(job: Job, plan: Plan, substrate: FakeSubstrate, seconds: float) -> tuple[Job, str]:
    """Passes until every replica has a pod, then all up: the head's uid."""
    for i in range(3):
        job, _ = step(job, plan, substrate, at(seconds + i / 10))
    assert set(substrate.pods) == {rep.name for rep in plan.replicas}
    head = _up(substrate)
    job, result = step(job, plan, substrate, at(seconds + 1))
    assert result.status.is_true(ConditionType.RUNNING)
    return job, head


def test_a_failing_run_is_retried_up_to_the_limit_then_fails_with_the_services_words() -> None:
    job, plan, books = _setup(limit=2)
    substrate = FakeSubstrate(plan)
    broken = {"state": "BROKEN", "why": "ValueError: attempt failed"}
    heads = []
    for attempt in range(3):
        job, head = _start(job, plan, substrate, seconds=10 * attempt + 1)
        heads.append(head)
        job, result = _report(substrate, job, plan, 10 * attempt + 5, broken, head)
        if attempt < 2:
            # Retried: every pod of the attempt goes, Restarting says why, nothing final.
            assert not result.status.finished
            deleted = {a.name for a in result.actions if isinstance(a, DeletePod)}
            assert deleted == {rep.name for rep in plan.replicas}
            restarting = result.status.condition(ConditionType.RESTARTING)
            assert restarting is not None and restarting.status == "True"
            assert f"retry {attempt + 1} of 2" in restarting.message
            assert "ValueError: attempt failed" in restarting.message
            assert any("retry" in e.message for e in events(result.actions))
            assert books.attempts == Attempts(failed=attempt + 1, retrying=True)
            assert result.status.start_time == at(10 * attempt + 5)  # each attempt's own
            # The stale report (the old head's) is not judged again: no second retry.
            job, again = _report(substrate, job, plan, 10 * attempt + 6, broken, head)
            assert not again.status.finished and books.attempts.failed == attempt + 1
            assert not books.attempts.retrying  # the old pods are gone
    assert len(set(heads)) == 3  # a new head each attempt
    failed = result.status.condition(ConditionType.FAILED)
    assert failed is not None and failed.status == "True" and failed.reason == "AppFailed"
    assert "ValueError: attempt failed" in failed.message
    assert books.attempts == Attempts(failed=3)


def test_a_success_on_the_second_try_succeeds_with_one_failed_and_one_succeeded() -> None:
    job, plan, books = _setup(limit=3)
    substrate = FakeSubstrate(plan)
    job, head = _start(job, plan, substrate, 1)
    job, _ = _report(substrate, job, plan, 5, {"state": "BROKEN", "why": "once"}, head)
    job, head = _start(job, plan, substrate, 6)
    job, result = _report(substrate, job, plan, 9, {"state": "DONE"}, head)
    assert result.status.is_true(ConditionType.SUCCEEDED)
    assert books.attempts == Attempts(failed=1, succeeded=1)
    # Finished: passes after change nothing of the count.
    job, _ = step(job, plan, substrate, at(20))
    assert books.attempts == Attempts(failed=1, succeeded=1)


def test_a_run_stopped_on_purpose_and_a_deadline_are_not_retried() -> None:
    job, plan, books = _setup(limit=3)
    substrate = FakeSubstrate(plan)
    job, head = _start(job, plan, substrate, 1)
    job, result = _report(substrate, job, plan, 5, {"state": "HALTED", "why": "stopped"}, head)
    assert result.status.is_true(ConditionType.FAILED)
    assert books.attempts == Attempts(failed=1)

    job, plan, books = _setup(limit=3, activeDeadlineSeconds=30)
    substrate = FakeSubstrate(plan)
    job, _ = _start(job, plan, substrate, 1)
    job, result = step(job, plan, substrate, at(40))
    failed = result.status.condition(ConditionType.FAILED)
    assert failed is not None and failed.reason == "DeadlineExceeded"
    assert books.attempts == Attempts(failed=1)


def test_a_report_of_no_live_head_is_not_judged() -> None:
    job, plan, books = _setup(limit=0)
    substrate = FakeSubstrate(plan)
    job, head = _start(job, plan, substrate, 1)
    job, result = _report(substrate, job, plan, 5, {"state": "BROKEN"}, "uid-of-a-gone-head")
    assert not result.status.finished
    job, result = _report(substrate, job, plan, 6, {"state": "BROKEN"}, head)
    assert result.status.is_true(ConditionType.FAILED)
    assert books.attempts == Attempts(failed=1)


def test_the_controllers_giving_up_is_retried_and_the_next_controller_has_its_full_limit() -> None:
    job, plan, books = _setup(limit=1)
    substrate = FakeSubstrate(plan)
    runner = plan.of_type("PS")[0].name
    job, _ = _start(job, plan, substrate, 1)
    # Locally: the runner failed once, was created again (a retired restart), failed again.
    substrate.pods[runner] = replace(substrate.pods[runner], phase="Failed", exit_code=1)
    job, result = step(job, plan, substrate, at(3))
    assert any(isinstance(a, DeletePod) and a.name == runner for a in result.actions)
    assert result.status.replica_statuses["PS"].restarts == 1
    job, _ = step(job, plan, substrate, at(4))
    _up(substrate)
    job, _ = step(job, plan, substrate, at(4.5))
    substrate.pods[runner] = replace(substrate.pods[runner], phase="Failed", exit_code=1)
    job, result = step(job, plan, substrate, at(5))
    assert not result.status.finished and books.attempts == Attempts(failed=1, retrying=True)
    assert "failed 2 times, more than its backoffLimit (1)" in str(
        result.status.condition(ConditionType.RESTARTING)
    )
    # The next attempt's runner starts with its full limit: one failure is retried again.
    assert result.status.replica_statuses["PS"].restarts == 0
    job, _ = _start(job, plan, substrate, 6)
    substrate.pods[runner] = replace(substrate.pods[runner], phase="Failed", exit_code=1)
    job, result = step(job, plan, substrate, at(9))
    assert not result.status.finished
    assert any(isinstance(a, DeletePod) and a.name == runner for a in non_events(result.actions))


def test_a_resumed_run_gives_the_controller_its_full_limit_again() -> None:
    job, plan, _ = _setup(limit=0)
    substrate = FakeSubstrate(plan)
    runner = plan.of_type("PS")[0].name
    job, _ = _start(job, plan, substrate, 1)
    # The runner has used its limit: 1 failure retired, 1 restart in place.
    substrate.pods[runner] = replace(substrate.pods[runner], restart_count=1)
    status = job.status.model_copy(deep=True)
    status.replica_statuses["PS"] = ReplicaStatus(restarts=2, retired_restarts=1)
    suspended = with_status(_job(suspend=True), status)
    suspended, result = step(suspended, plan, substrate, at(3))
    assert result.status.is_true(ConditionType.SUSPENDED)
    assert result.status.replica_statuses["PS"].restarts == 0
    resumed = with_status(_job(), suspended.status)
    resumed, _ = _start(resumed, plan, substrate, 4)
    substrate.pods[runner] = replace(substrate.pods[runner], phase="Failed", exit_code=1)
    resumed, result = step(resumed, plan, substrate, at(8))
    # Without the reset, 2 + 1 failures would be over the limit of 1 and fail the job.
    assert not result.status.finished
    assert any(isinstance(a, DeletePod) and a.name == runner for a in result.actions)


def test_a_retry_before_the_last_attempt_ran_says_its_own_count() -> None:
    """Restarting stays True from one retry to the next when the new attempt never ran
    (its runner gave up while the cluster was still coming up): the condition's message
    is the latest retry's, not the first's."""
    job, plan, books = _setup(limit=2)
    substrate = FakeSubstrate(plan)
    runner = plan.of_type("PS")[0].name
    job, head = _start(job, plan, substrate, 1)
    job, result = _report(substrate, job, plan, 5, {"state": "BROKEN", "why": "first"}, head)
    first = result.status.condition(ConditionType.RESTARTING)
    assert first is not None and "retry 1 of 2" in first.message
    for i in range(3):
        job, result = step(job, plan, substrate, at(6 + i / 10))
    assert runner in substrate.pods and not result.status.is_true(ConditionType.RUNNING)
    for seconds in (7, 8):  # the runner fails twice: over its backoffLimit of 1
        substrate.pods[runner] = replace(substrate.pods[runner], phase="Failed", exit_code=1)
        job, result = step(job, plan, substrate, at(seconds))
        job, _ = step(job, plan, substrate, at(seconds + 0.5))
    assert books.attempts.failed == 2 and not result.status.finished
    second = result.status.condition(ConditionType.RESTARTING)
    assert second is not None and second.status == "True"
    assert "retry 2 of 2" in second.message and "backoffLimit" in second.message
    assert second.last_update_time == at(8)
