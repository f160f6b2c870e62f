"""The core reads a replica run through a child controller (``ReplicaPlan.controller``)
from its controller's status, and fails the job with the controller's reason once the
replica has failed for good, by one rule on both substrates.

On Kubernetes the substrate reports the controller's counts and conditions
(``Observed.controllers``) and the core makes the replica's pod of them: the ``Failed``
condition is Failed, ``Complete`` Succeeded, a ready pod Running; its failed runs are its
restarts. Locally the replica is a process reported as a pod, and its restarts count
against the same ``backoff_limit``. Plans are built by hand (corekit): worker 1 of a
TFJob-shaped Plan runs through a controller of the test's.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from corekit import at, plan_for, pod, tfjob

from kubemill.api import ConditionType, Job, ReplicaStatus
from kubemill.core import (
    CreatePod,
    DeletePod,
    Observed,
    ObservedCondition,
    ObservedController,
    ReconcileOptions,
    ReconcileResult,
    reconcile,
    with_controllers,
)
from kubemill.frameworks import ChildController, Plan
from kubemill.kinds import lifecycle_for

CONTROLLER = ChildController(name="x-runner", backoff_limit=2, failure_reason="RunnerFailed")


def _plan() -> tuple[Job, Plan]:
    job = tfjob(workers=2, restart="OnFailure")
    plan = plan_for(job)
    controlled = replace(plan.replicas[1], controller=CONTROLLER)
    return job, replace(plan, replicas=(plan.replicas[0], controlled))


def _pass(job: Job, plan: Plan, observed: Observed, seconds: float = 10) -> ReconcileResult:
    return reconcile(
        job,
        plan,
        observed,
        at(seconds),
        options=ReconcileOptions(),
        lifecycle=lifecycle_for(plan.kind),
    )


def test_the_replicas_pod_is_read_from_its_controllers_status() -> None:
    _, plan = _plan()
    cases = [
        (ObservedController("x-runner"), "Pending", False),
        (ObservedController("x-runner", active=1), "Pending", False),
        (ObservedController("x-runner", active=1, ready=1), "Running", True),
        (
            ObservedController(
                "x-runner", succeeded=1, conditions=(ObservedCondition("Complete", "True"),)
            ),
            "Succeeded",
            False,
        ),
        (
            ObservedController(
                "x-runner",
                failed=3,
                conditions=(ObservedCondition("Failed", "True", "Gone", "why"),),
            ),
            "Failed",
            False,
        ),
        # A condition that is not True says nothing.
        (
            ObservedController(
                "x-runner", active=1, conditions=(ObservedCondition("Failed", "False"),)
            ),
            "Pending",
            False,
        ),
    ]
    for controller, phase, ready in cases:
        observed = with_controllers(
            plan, Observed(pods=(pod(plan, "worker-0"),), controllers=(controller,))
        )
        (runner,) = [p for p in observed.pods if p.name == plan.replicas[1].name]
        assert (runner.phase, runner.ready, runner.restart_count) == (
            phase,
            ready,
            controller.failed,
        )
    # A controller no replica of the Plan names is left out; no controller, nothing changes.
    stray = Observed(controllers=(ObservedController("other", active=1, ready=1),))
    assert with_controllers(plan, stray).pods == ()


def test_the_replica_is_created_once_and_its_failed_runs_are_counted_as_restarts() -> None:
    job, plan = _plan()
    first = _pass(job, plan, Observed(pods=(pod(plan, "worker-0"),)))
    assert CreatePod(plan.replicas[1].name) in first.actions
    retrying = ObservedController("x-runner", active=1, ready=1, failed=2)
    result = _pass(job, plan, Observed(pods=(pod(plan, "worker-0"),), controllers=(retrying,)))
    assert not result.status.finished
    assert CreatePod(plan.replicas[1].name) not in result.actions
    assert result.status.replica_statuses["Worker"].restarts == 2
    assert result.status.is_true(ConditionType.RUNNING)


def test_the_controller_giving_up_fails_the_job_with_its_reason() -> None:
    job, plan = _plan()
    gave_up = ObservedController(
        "x-runner",
        failed=1,  # within the limit: the controller's word is enough (a deadline of its own)
        conditions=(ObservedCondition("Failed", "True", "DeadlineExceeded", "too long", at(5)),),
    )
    result = _pass(job, plan, Observed(pods=(pod(plan, "worker-0"),), controllers=(gave_up,)))
    failed = result.status.condition(ConditionType.FAILED)
    assert failed is not None and failed.status == "True"
    assert failed.reason == "RunnerFailed"
    assert "Worker x-runner failed: DeadlineExceeded: too long" in failed.message


@pytest.mark.parametrize(("restarts", "fails"), [(0, False), (1, False), (2, True)])
def test_locally_a_process_failing_more_than_the_limit_fails_the_job_with_the_same_reason(
    restarts: int, fails: bool
) -> None:
    job, plan = _plan()
    job.status.replica_statuses["Worker"] = ReplicaStatus(
        restarts=restarts, retired_restarts=restarts
    )
    failed_run = pod(plan, "worker-1", "Failed", exit_code=3, finished=5)
    result = _pass(job, plan, Observed(pods=(pod(plan, "worker-0"), failed_run)))
    condition = result.status.condition(ConditionType.FAILED)
    if fails:
        assert condition is not None and condition.reason == "RunnerFailed"
        assert "failed 3 times, more than its backoffLimit (2): exit code 3" in condition.message
    else:
        assert condition is None
        assert any(isinstance(a, DeletePod) and a.name == failed_run.name for a in result.actions)
