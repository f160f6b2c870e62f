"""K8sJobMode's submitter as KubeRay runs it: a batch/v1 Job of the RayJob's name (the
Plan's child controller), ``backoffLimit`` from ``submitterConfig`` (default 2), its pod
template the submitter's pod; rendered and valid against the official schema. The core
reads the submitter from the Job's status and fails the RayJob with ``SubmissionFailed``
when the Job gives up; locally, where the submitter is a process, the same limit counts its
restarts and fails it with the same reason. Ray's own verdict still decides the rest.
Pure: the planner, ``render`` and the core (the operator's side:
tests/engines/ray/test_rayjob_operator.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubemill.api import ConditionType, ReplicaStatus
from kubemill.core import (
    CreatePod,
    DeletePod,
    Observed,
    ObservedCondition,
    ObservedController,
    ObservedPod,
    ReconcileOptions,
    ReconcileResult,
    reconcile,
)
from kubemill.engines.ray.api.rayjob import RayJob
from kubemill.frameworks import ChildController, RemoteReport
from kubemill.kinds import lifecycle_for, load_one
from kubemill.substrates.kubernetes.render import plan_on_kubernetes, render_job
from support import manifest_checks

EXAMPLE = Path(__file__).parents[3] / "examples" / "ray" / "rayjob-sum.yaml"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
SUBMITTER = "rayjob-sum-submitter-0"


def rayjob(**spec: Any) -> RayJob:
    doc = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    doc["metadata"]["uid"] = "0f0e0d0c-0000-4000-8000-000000000001"
    doc["spec"].update(spec)
    job = load_one(doc)
    assert isinstance(job, RayJob)
    return job


def cluster_pods(job: RayJob) -> tuple[ObservedPod, ...]:
    """Every node of the cluster Running and ready."""
    return tuple(
        ObservedPod(r.name, r.replica_type, r.index, "Running", ready=True)
        for r in plan_on_kubernetes(job).replicas
        if r.controller is None
    )


def submitter_job(**status: Any) -> ObservedController:
    return ObservedController(name="rayjob-sum", **status)


def run(job: RayJob, observed: Observed, now: datetime = NOW) -> tuple[RayJob, ReconcileResult]:
    result = reconcile(
        job,
        plan_on_kubernetes(job),
        observed,
        now,
        options=ReconcileOptions(),
        lifecycle=lifecycle_for(job.KIND),
    )
    out = job.model_copy(update={"status": result.status})
    assert isinstance(out, RayJob)
    return out, result


def test_the_submitter_renders_as_kuberays_job_and_passes_kubernetes_validate() -> None:
    objects = render_job(rayjob(submitterConfig={"backoffLimit": 4}))
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("Service", "rayjob-sum-head-svc"),
        ("Pod", "rayjob-sum-head-0"),
        ("Pod", "rayjob-sum-workers-0"),
        ("Pod", "rayjob-sum-workers-1"),
        ("Job", "rayjob-sum"),
    ]
    assert [e for o in objects for e in manifest_checks.k8s_errors(o)] == []
    job = objects[-1]
    assert job["apiVersion"] == "batch/v1"
    assert job["spec"]["backoffLimit"] == 4
    assert job["metadata"]["ownerReferences"][0]["kind"] == "RayJob"
    assert job["metadata"]["labels"]["kubemill.dev/job-name"] == "rayjob-sum"
    pod = job["spec"]["template"]
    assert set(pod["metadata"]) <= {"labels", "annotations"}
    assert pod["metadata"]["labels"]["kubemill.dev/replica-type"] == "submitter"
    assert pod["spec"]["restartPolicy"] == "Never"  # the Job controller retries, with new pods
    (container,) = pod["spec"]["containers"]
    assert container["name"] == "ray-job-submitter"
    assert container["command"][:2] == ["bash", "-c"]
    assert "ray job submit" in container["command"][2]


def test_the_plan_runs_the_submitter_through_a_controller_and_the_cluster_without() -> None:
    plan = plan_on_kubernetes(rayjob())
    assert plan.replica(SUBMITTER).controller == ChildController(
        "rayjob-sum", 2, "SubmissionFailed"
    )
    assert [r.name for r in plan.replicas if r.controller is not None] == [SUBMITTER]
    # The RayJob's pods have no backoff limit of their own: KubeRay keeps its cluster running.
    assert rayjob().run_policy.backoff_limit is None
    assert plan_on_kubernetes(rayjob(submitterConfig={"backoffLimit": 0})).replica(
        SUBMITTER
    ).controller == ChildController("rayjob-sum", 0, "SubmissionFailed")
    http = plan_on_kubernetes(rayjob(submissionMode="HTTPMode"))
    assert all(r.controller is None for r in http.replicas)


def test_the_job_is_created_once_the_cluster_is_ready_and_read_back_as_the_submitter() -> None:
    job = rayjob()
    _, first = run(job, Observed(pods=cluster_pods(job)))
    assert CreatePod(SUBMITTER) in first.actions
    # A Job with no ready pod yet: the submitter is Pending, not created again.
    pending, second = run(job, Observed(pods=cluster_pods(job), controllers=(submitter_job(),)))
    assert CreatePod(SUBMITTER) not in second.actions
    assert not pending.status.is_true(ConditionType.RUNNING)
    running, _ = run(
        job, Observed(pods=cluster_pods(job), controllers=(submitter_job(active=1, ready=1),))
    )
    assert running.status.is_true(ConditionType.RUNNING)
    assert running.status.replica_statuses["Submitter"].active == 1


def test_the_jobs_failed_pods_are_counted_and_its_failed_condition_fails_the_rayjob() -> None:
    job = rayjob()
    retried, result = run(
        job,
        Observed(pods=cluster_pods(job), controllers=(submitter_job(active=1, failed=2),)),
    )
    assert not retried.status.finished
    assert retried.status.replica_statuses["Submitter"].restarts == 2
    assert not any(isinstance(a, DeletePod) for a in result.actions)
    gave_up = submitter_job(
        failed=3,
        conditions=(
            ObservedCondition(
                "Failed",
                "True",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
                NOW,
            ),
        ),
    )
    failed, result = run(
        retried,
        Observed(pods=cluster_pods(job), controllers=(gave_up,)),
        NOW + timedelta(seconds=5),
    )
    wire = failed.status.to_wire()
    assert failed.status.is_true(ConditionType.FAILED)
    assert (wire["jobDeploymentStatus"], wire["reason"]) == ("Failed", "SubmissionFailed")
    assert "BackoffLimitExceeded: Job has reached the specified backoff limit" in wire["message"]
    assert wire["failed"] == 1
    # shutdownAfterJobFinishes (the example's): the cluster's pods go, and the Job with them.
    deleted = {a.name for a in result.actions if isinstance(a, DeletePod)}
    assert deleted == {r.name for r in plan_on_kubernetes(job).replicas}


def test_rays_verdict_wins_over_a_submitter_that_gave_up_after_the_job_ended() -> None:
    job = rayjob()
    gave_up = submitter_job(failed=3, conditions=(ObservedCondition("Failed", "True", "X"),))
    done, _ = run(
        job,
        Observed(
            pods=cluster_pods(job),
            controllers=(gave_up,),
            remote=RemoteReport(True, {"status": "SUCCEEDED"}),
        ),
    )
    assert done.status.is_true(ConditionType.SUCCEEDED)


@pytest.mark.parametrize(("restarts", "fails"), [(1, False), (2, True)])
def test_locally_the_submitters_restarts_count_against_the_same_limit(
    restarts: int, fails: bool
) -> None:
    # Locally the submitter is a process reported as a pod (no controller object): a failed
    # run is retried until it would be the third failure of backoffLimit 2.
    job = rayjob()
    job.status.replica_statuses["Submitter"] = ReplicaStatus(
        restarts=restarts, retired_restarts=restarts
    )
    failed_run = ObservedPod(SUBMITTER, "Submitter", 0, "Failed", exit_code=1, finished=NOW)
    out, result = run(job, Observed(pods=(*cluster_pods(job), failed_run)))
    assert out.status.is_true(ConditionType.FAILED) is fails
    if fails:
        wire = out.status.to_wire()
        assert wire["reason"] == "SubmissionFailed"
        assert "failed 3 times, more than its backoffLimit (2): exit code 1" in wire["message"]
    else:
        assert any(isinstance(a, DeletePod) and a.name == SUBMITTER for a in result.actions)
