"""RayJob's model and planner, pure: KubeRay's manifests load, what kubemill does not honour
is refused at its field path, the submitter runs KubeRay's sequence with every value an
argument of its own, HTTPMode has kubemill submit it, and Ray's job statuses become the
core's verdict and KubeRay's status fields in one place (``framework/rayjob.py``)."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubemill.api import ConditionType, ManifestError
from kubemill.core import (
    DeleteJob,
    DeletePod,
    Observed,
    ObservedPod,
    ReconcileOptions,
    SubmitRemote,
    reconcile,
)
from kubemill.engines.ray.api.rayjob import SUBMITTER, RayJob
from kubemill.engines.ray.framework.rayjob import SUBMITTER_SCRIPT, status_fields, verdict
from kubemill.frameworks import RemoteReport, StatusView
from kubemill.kinds import lifecycle_for, load_one
from kubemill.substrates.kubernetes.render import plan_on_kubernetes

EXAMPLES = Path(__file__).parents[3] / "examples" / "ray"


def manifest(name: str = "rayjob-sum.yaml") -> dict[str, Any]:
    loaded = yaml.safe_load((EXAMPLES / name).read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def errors_of(doc: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ManifestError) as caught:
        load_one(doc)
    return {e.path: e.message for e in caught.value.errors}


@pytest.mark.parametrize(
    ("field", "value", "path"),
    [
        ("submissionMode", "InteractiveMode", "spec.submissionMode"),
        ("submissionMode", "SidecarMode", "spec.submissionMode"),
        ("submissionMode", "Carrier", "spec.submissionMode"),
        ("backoffLimit", -1, "spec.backoffLimit"),
        ("schedule", "*/5 * * * *", "spec.schedule"),
        ("deletionStrategy", {"onSuccess": {"policy": "DeleteCluster"}}, "spec.deletionStrategy"),
        ("managedBy", "kueue.x-k8s.io/multikueue", "spec.managedBy"),
        ("runtimeEnvYAML", "- a list", "spec.runtimeEnvYAML"),
        ("runtimeEnvYAML", "pip: [", "spec.runtimeEnvYAML"),
        ("entrypointResources", "{not json", "spec.entrypointResources"),
        ("jobId", "has spaces; and more", "spec.jobId"),
        ("entrypoint", "  ", "spec.entrypoint"),
    ],
)
def test_what_is_not_honoured_is_refused_at_its_field_path(
    field: str, value: Any, path: str
) -> None:
    doc = manifest()
    doc["spec"][field] = value
    assert path in errors_of(doc)


def test_the_cluster_is_required_and_checked_at_its_own_paths() -> None:
    doc = manifest()
    del doc["spec"]["rayClusterSpec"]
    assert "spec.rayClusterSpec" in errors_of(doc)
    doc = manifest()
    cluster = doc["spec"]["rayClusterSpec"]
    cluster["workerGroupSpecs"][0]["groupName"] = "submitter"
    cluster["enableInTreeAutoscaling"] = True
    found = errors_of(doc)
    assert "spec.rayClusterSpec.workerGroupSpecs[0].groupName" in found
    assert "spec.rayClusterSpec.enableInTreeAutoscaling" in found


def test_a_kuberay_manifest_loads_unchanged_and_round_trips() -> None:
    job = load_one(manifest())
    assert isinstance(job, RayJob)
    assert job.to_wire()["spec"]["entrypoint"] == manifest()["spec"]["entrypoint"]
    assert job.spec.submission_mode == "K8sJobMode"
    assert list(job.replica_specs) == ["Head", "workers", SUBMITTER]
    http = load_one(manifest("rayjob-http.yaml"))
    assert isinstance(http, RayJob)
    assert list(http.replica_specs) == ["Head", "workers"]  # no submitter


def test_the_submitter_runs_kuberays_sequence_with_every_value_an_argument() -> None:
    doc = manifest()
    doc["spec"].update(
        jobId="sum-1",
        entrypoint="python run.py --steps 3 'two words'",
        runtimeEnvYAML="env_vars:\n  A: '1'\n",
        metadata={"team": "ml"},
        entrypointNumCpus=0.5,
        entrypointResources='{"custom": 1}',
    )
    job = load_one(doc)
    plan = plan_on_kubernetes(job)
    submitter = plan.replica("rayjob-sum-submitter-0")
    (container,) = submitter.template.spec.containers
    dashboard = "http://rayjob-sum-head-svc.default.svc.cluster.local:8265"
    assert container.command == [
        "bash",
        "-c",
        SUBMITTER_SCRIPT,
        "ray-job-submitter",
        dashboard,
        "sum-1",
        "--runtime-env-json",
        json.dumps({"env_vars": {"A": "1"}}),
        "--metadata-json",
        json.dumps({"team": "ml"}),
        "--entrypoint-num-cpus",
        "0.5",
        "--entrypoint-resources",
        '{"custom": 1}',
        "--",
        "python",
        "run.py",
        "--steps",
        "3",
        "two words",
    ]
    assert container.image == "rayproject/ray:2.60.0"  # the head's, as KubeRay's default
    # After every node of the cluster: created once they are all ready.
    assert submitter.stage > max(r.stage for r in plan.replicas if r is not submitter)
    assert plan.start_gate == "ready"
    assert plan.remote is not None
    # The substrate asks the head (by its own address for it) on the dashboard's port.
    assert plan.remote.after == "rayjob-sum-head-0"
    assert plan.remote.url("10.1.2.3", plan.remote.status_path) == (
        "http://10.1.2.3:8265/api/jobs/sum-1"
    )
    assert plan.remote.submit_path == ""  # the submitter submits


def test_a_dashboard_port_in_the_heads_params_is_the_port_everything_uses() -> None:
    doc = manifest("rayjob-http.yaml")
    doc["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"]["dashboard-port"] = "8300"
    job = load_one(doc)
    plan = plan_on_kubernetes(job)
    head = plan.replica("rayjob-http-head-0")
    (ray,) = head.template.spec.containers
    assert "--dashboard-port=8300" in (ray.command or [])
    ports = {p.name: p.container_port for p in ray.ports or []}
    assert ports["dashboard"] == 8300 and ports["gcs-server"] == 6379
    probe = json.dumps(ray.readiness_probe)
    assert "localhost:8300/api/gcs_healthz" in probe
    (service,) = plan.exposed
    assert {p.name: p.port for p in service.ports}["dashboard"] == 8300
    assert plan.remote is not None and plan.remote.port == 8300
    assert isinstance(job, RayJob)
    wire = _pass(job, Observed()).status.to_wire()
    assert wire["dashboardURL"] == "rayjob-http-head-svc.default.svc.cluster.local:8300"


def test_http_mode_has_kubemill_submit_the_job_itself() -> None:
    job = load_one(manifest("rayjob-http.yaml"))
    plan = plan_on_kubernetes(job)
    assert SUBMITTER not in {r.replica_type for r in plan.replicas}
    assert plan.remote is not None
    assert (plan.remote.port, plan.remote.submit_path) == (8265, "/api/jobs/")
    body = dict(plan.remote.submit_body)
    assert body["submission_id"] == "rayjob-http"
    assert body["runtime_env"] == {"env_vars": {"ANSWER": "41"}}
    assert body["entrypoint"].startswith('python -c "')


@pytest.mark.parametrize(
    ("status", "state"),
    [
        ("PENDING", "running"),
        ("RUNNING", "running"),
        ("SUCCEEDED", "succeeded"),
        ("FAILED", "failed"),
        ("STOPPED", "failed"),
    ],
)
def test_rays_job_statuses_are_the_verdict(status: str, state: str) -> None:
    found = verdict(RemoteReport(True, {"status": status, "message": "Ray's words"}))
    assert found.state == state
    if state == "failed":
        assert found.reason == "AppFailed"
        assert "Ray's words" in found.message and status in found.message
        # A job stopped through Ray's API was stopped on purpose: never retried.
        assert found.retryable is (status == "FAILED")
    assert verdict(RemoteReport(False)).state == "waiting"


def _pods(job: RayJob, *, ready: bool = True) -> tuple[ObservedPod, ...]:
    plan = plan_on_kubernetes(job)
    return tuple(
        ObservedPod(
            name=r.name, replica_type=r.replica_type, index=r.index, phase="Running", ready=ready
        )
        for r in plan.replicas
    )


def _pass(job: RayJob, observed: Observed) -> RayJob:
    result = reconcile(
        job,
        plan_on_kubernetes(job),
        observed,
        datetime(2026, 1, 1, tzinfo=UTC),
        options=ReconcileOptions(),
        lifecycle=lifecycle_for(job.KIND),
    )
    out = job.model_copy(update={"status": result.status})
    assert isinstance(out, RayJob)
    return out


def test_a_failed_ray_job_fails_the_rayjob_with_rays_message_in_its_status() -> None:
    job = load_one(manifest())
    assert isinstance(job, RayJob)
    message = "Job entrypoint command failed with exit code 1: ValueError: no"
    body = {"status": "FAILED", "message": message, "start_time": 1767225600000}
    done = _pass(job, Observed(pods=_pods(job), remote=RemoteReport(True, body)))
    assert done.status.is_true(ConditionType.FAILED)
    wire = done.status.to_wire()
    assert wire["jobStatus"] == "FAILED"
    assert wire["jobDeploymentStatus"] == "Failed"
    assert wire["reason"] == "AppFailed"
    assert message in wire["message"]
    assert wire["rayJobInfo"]["startTime"].startswith("2026-01-01T00:00:00")
    assert wire["dashboardURL"] == "rayjob-sum-head-svc.default.svc.cluster.local:8265"
    assert wire["jobId"] == "rayjob-sum"


def test_a_succeeded_ray_job_completes_the_rayjob() -> None:
    job = load_one(manifest())
    assert isinstance(job, RayJob)
    running = _pass(
        job, Observed(pods=_pods(job), remote=RemoteReport(True, {"status": "RUNNING"}))
    )
    assert running.status.to_wire()["jobDeploymentStatus"] == "Running"
    assert not running.status.finished
    done = _pass(
        running, Observed(pods=_pods(job), remote=RemoteReport(True, {"status": "SUCCEEDED"}))
    )
    wire = done.status.to_wire()
    assert done.status.is_true(ConditionType.SUCCEEDED)
    assert (wire["jobStatus"], wire["jobDeploymentStatus"]) == ("SUCCEEDED", "Complete")
    assert wire["endTime"] == wire["completionTime"]


def test_backoff_limit_retries_on_a_new_cluster_with_kuberays_counts_and_states() -> None:
    doc = manifest()
    doc["spec"]["backoffLimit"] = 1
    job = load_one(doc)
    assert isinstance(job, RayJob)
    pods = _pods(job)
    head = pods[0].name
    first = tuple(replace(p, uid=f"{p.name}-1") for p in pods)
    failed = RemoteReport(True, {"status": "FAILED", "message": "no"}, source=f"{head}-1")
    retrying = _pass(job, Observed(pods=first, remote=failed))
    wire = retrying.status.to_wire()
    assert not retrying.status.finished
    assert (wire["failed"], wire["succeeded"], wire["jobDeploymentStatus"]) == (1, 0, "Retrying")
    assert wire["jobStatus"] == "FAILED"  # Ray's word on this attempt, as KubeRay's
    # While the old cluster goes, Retrying; the old head's FAILED is not counted again, nor
    # shown as the job's any more.
    going = tuple(replace(p, deleting=True) for p in first)
    still = _pass(retrying, Observed(pods=going, remote=failed))
    wire = still.status.to_wire()
    assert (wire["failed"], wire["jobDeploymentStatus"]) == (1, "Retrying")
    assert "jobStatus" not in wire and "message" not in wire
    # Gone: the new cluster is initializing, then Ray's success completes the RayJob.
    new = _pass(still, Observed(remote=failed))
    assert (new.status.to_wire()["jobDeploymentStatus"], new.status.failed) == ("Initializing", 1)
    second = tuple(replace(p, uid=f"{p.name}-2") for p in pods)
    succeeded = RemoteReport(True, {"status": "SUCCEEDED"}, source=f"{head}-2")
    done = _pass(new, Observed(pods=second, remote=succeeded))
    wire = done.status.to_wire()
    assert done.status.is_true(ConditionType.SUCCEEDED)
    assert (wire["failed"], wire["succeeded"], wire["jobDeploymentStatus"]) == (1, 1, "Complete")
    # backoffLimit 0 (KubeRay's default): the first failure is final, counted.
    plain = load_one(manifest())
    assert isinstance(plain, RayJob)
    once = _pass(plain, Observed(pods=first, remote=failed))
    assert once.status.is_true(ConditionType.FAILED)
    assert (once.status.failed, once.status.succeeded) == (1, 0)


def test_http_mode_asks_for_the_submission_once_the_head_is_ready() -> None:
    job = load_one(manifest("rayjob-http.yaml"))
    assert isinstance(job, RayJob)
    plan = plan_on_kubernetes(job)
    for ready, asked in ((False, False), (True, True)):
        result = reconcile(
            job,
            plan,
            Observed(pods=_pods(job, ready=ready), remote=RemoteReport(False)),
            datetime(2026, 1, 1, tzinfo=UTC),
            options=ReconcileOptions(),
            lifecycle=lifecycle_for(job.KIND),
        )
        assert (SubmitRemote() in result.actions) is asked


def test_before_anything_is_known_the_rayjob_is_initializing_and_suspended_when_asked() -> None:
    job = load_one(manifest())
    assert isinstance(job, RayJob)
    first = _pass(job, Observed())
    assert first.status.to_wire()["jobDeploymentStatus"] == "Initializing"
    doc = copy.deepcopy(manifest())
    doc["spec"]["suspend"] = True
    suspended = load_one(doc)
    assert isinstance(suspended, RayJob)
    assert _pass(suspended, Observed()).status.to_wire()["jobDeploymentStatus"] == "Suspended"


def test_shutdown_after_finish_stops_the_cluster_and_keeps_the_rayjob() -> None:
    doc = manifest()
    doc["spec"]["ttlSecondsAfterFinished"] = 30
    policy = load_one(doc).run_policy
    # As KubeRay's, the RayJob itself is never deleted by a TTL: its cluster is.
    assert (policy.clean_pod_policy, policy.ttl_seconds_after_finished) == ("All", None)
    doc["spec"]["shutdownAfterJobFinishes"] = False
    assert load_one(doc).run_policy.clean_pod_policy == "None"  # the cluster stays


def test_the_status_extension_sets_only_fields_the_status_declares() -> None:
    job = load_one(manifest())
    assert isinstance(job, RayJob)
    plan = plan_on_kubernetes(job)
    view = StatusView(job=job, plan=plan, status=job.status, pods=(), remote=RemoteReport(False))
    assert set(status_fields(view)) <= set(type(job.status).model_fields)


@pytest.mark.parametrize("ttl", [0, 60])
def test_the_cluster_is_shut_down_ttl_seconds_after_the_end_and_the_rayjob_stays(ttl: int) -> None:
    doc = manifest()  # shutdownAfterJobFinishes: true
    doc["spec"]["ttlSecondsAfterFinished"] = ttl
    job = load_one(doc)
    assert isinstance(job, RayJob)
    plan = plan_on_kubernetes(job)
    assert plan.clean_after == (timedelta(seconds=ttl) if ttl else None)
    end = datetime(2026, 1, 1, tzinfo=UTC)
    done = RemoteReport(True, {"status": "SUCCEEDED"})

    def at(when: datetime, status_of: RayJob) -> Any:
        return reconcile(
            status_of,
            plan,
            Observed(pods=_pods(job), remote=done),
            when,
            options=ReconcileOptions(),
            lifecycle=lifecycle_for(job.KIND),
        )

    first = at(end, job)
    assert first.status.is_true(ConditionType.SUCCEEDED)
    finished = job.model_copy(update={"status": first.status})
    deleted = {a.name for a in first.actions if isinstance(a, DeletePod)}
    if not ttl:
        assert deleted == {r.name for r in plan.replicas}  # at once
        return
    assert not deleted  # the cluster serves on until the TTL
    assert first.requeue_after == timedelta(seconds=ttl)
    before = at(end + timedelta(seconds=ttl - 1), finished)
    assert not any(isinstance(a, DeletePod) for a in before.actions)
    after = at(end + timedelta(seconds=ttl), finished)
    assert {a.name for a in after.actions if isinstance(a, DeletePod)} == {
        r.name for r in plan.replicas
    }
    # KubeRay's TTL is the cluster's: the RayJob itself is never deleted.
    assert not any(isinstance(a, DeleteJob) for a in after.actions)
