"""The operator runs a RayJob, in kubemill's group and KubeRay's: the head, then the
workers once the head is ready, then the submitter once every node is, as KubeRay's: a
batch/v1 Job of the RayJob's name, each object exactly as ``kubemill render`` prints it
(the submitter's ``ray job submit`` sequence included) and owned by the RayJob; KubeRay's
status fields written; the Job's ``Failed`` condition fails the RayJob with
``SubmissionFailed``; ``suspend`` removes every pod and the Job, and resuming brings the
head back. Against kmock (no Job controller: the test writes the Job's status as the
controller would), one operator for the module (the operator tests' fixtures, from
tests/engines/conftest.py).

Not here: the Ray job's outcome, read from Ray's job API at the head pod's IP, which the
kubelet stand-in does not report here (tests/engines/ray/test_rayjob_operator_ray.py has a
real Ray head play that pod; tests/engines/ray/test_rayjob_local.py runs real Ray jobs locally).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubemill.kinds import load_one
from kubemill.substrates.kubernetes.operator.reconciler import RESTARTS_ANNOTATION
from kubemill.substrates.kubernetes.render import render_job
from support.kmock_cluster import ApiError
from support.operator_support import (
    Cluster,
    Kubelet,
    Operator,
    condition,
    is_true,
    job_path,
    now_stamp,
)
from support.waiting import eventually

EXAMPLE = Path(__file__).parents[3] / "examples" / "ray" / "rayjob-sum.yaml"
CONTAINERS = {"head": "ray-head", "workers": "ray-worker", "submitter": "ray-job-submitter"}


def pods_of(cluster: Cluster, namespace: str) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in cluster.list(f"/api/v1/namespaces/{namespace}/pods")}


def restarts_of(job: dict[str, Any], upstream: bool, replica_type: str = "workers") -> int:
    """A replica type's restarts the operator recorded: in the status in kubemill's group,
    in its annotation in KubeRay's."""
    if upstream:
        recorded = json.loads(job["metadata"].get("annotations", {}).get(RESTARTS_ANNOTATION, "{}"))
        return int(recorded.get(replica_type, {}).get("restarts", 0))
    statuses = job.get("status", {}).get("replicaStatuses", {})
    return int(statuses.get(replica_type, {}).get("restarts", 0))


def _run(kubelet: Kubelet, name: str) -> None:
    kubelet.set(name, "Running", container=CONTAINERS[name.split("-")[1]])


def jobs_of(cluster: Cluster, namespace: str) -> dict[str, dict[str, Any]]:
    return {
        j["metadata"]["name"]: j
        for j in cluster.list(f"/apis/batch/v1/namespaces/{namespace}/jobs")
    }


def set_job_status(cluster: Cluster, namespace: str, name: str, status: dict[str, Any]) -> None:
    """Write a Job's status as the Job controller does."""
    cluster.patch(f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}/status", {"status": status})


@pytest.mark.parametrize("upstream", [False, True], ids=["kubemill", "kuberay"])
def test_the_operator_brings_up_the_cluster_then_the_submitter_as_rendered(
    cluster: Cluster, operator: Operator, namespace: str, kubelet: Kubelet, upstream: bool
) -> None:
    manifest = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    manifest["metadata"]["name"] = "rj"
    if not upstream:
        manifest["apiVersion"] = "kubemill.dev/v1"
    created = cluster.create(job_path("RayJob", namespace, upstream=upstream), manifest)
    path = job_path("RayJob", namespace, "rj", upstream=upstream)
    objects = render_job(load_one(created))
    rendered = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Pod"}
    assert set(rendered) == {"rj-head-0", "rj-workers-0", "rj-workers-1"}
    (rendered_job,) = [o for o in objects if o["kind"] == "Job"]
    assert rendered_job["metadata"]["name"] == "rj"

    def pods_are(names: set[str]) -> dict[str, dict[str, Any]]:
        return eventually(
            lambda: (found := pods_of(cluster, namespace)) and set(found) == names and found,
            what=f"pods {sorted(names)}",
        )

    # Stage by stage, each once the one before is ready: head, workers, then the submitter.
    stages = [{"rj-head-0"}, {"rj-workers-0", "rj-workers-1"}]
    expected: set[str] = set()
    for stage in stages:
        expected |= stage
        pods = pods_are(expected)
        for name in stage:
            assert pods[name]["spec"] == rendered[name]["spec"], name
            owner = pods[name]["metadata"]["ownerReferences"][0]
            assert owner["uid"] == created["metadata"]["uid"]
            _run(kubelet, name)
    submitter = eventually(lambda: jobs_of(cluster, namespace).get("rj"), what="submitter Job")
    assert submitter["spec"] == rendered_job["spec"] | {"template": submitter["spec"]["template"]}
    assert submitter["spec"]["backoffLimit"] == 2  # KubeRay's default
    assert submitter["spec"]["template"]["spec"] == rendered_job["spec"]["template"]["spec"]
    assert submitter["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    assert submitter["metadata"]["labels"]["kubemill.dev/job-name"] == "rj"
    assert set(pods_of(cluster, namespace)) == expected  # the Job controller makes its pod
    set_job_status(cluster, namespace, "rj", {"active": 1, "ready": 1, "startTime": now_stamp()})
    job = eventually(
        lambda: (j := cluster.get(path)) and is_true(j, "Running") and j, what="Running"
    )
    status = job["status"]
    # The head pod has no IP here, so Ray's job API is not asked: the deployment is starting.
    assert status["jobDeploymentStatus"] == "Initializing"
    assert status["rayClusterName"] == "rj"
    assert status["dashboardURL"] == f"rj-head-svc.{namespace}.svc.cluster.local:8265"
    container = submitter["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][:2] == ["bash", "-c"]
    assert "ray job submit" in container["command"][2]
    assert f"http://rj-head-svc.{namespace}.svc.cluster.local:8265" in container["command"]
    assert submitter["spec"]["template"]["spec"]["restartPolicy"] == "Never"

    # A worker evicted: the pod recreated and its restart counted (in KubeRay's group, in
    # the annotation kubemill keeps restart counts in: its status schema has none).
    old_uid = pods_of(cluster, namespace)["rj-workers-1"]["metadata"]["uid"]
    kubelet.set("rj-workers-1", "Failed", container="ray-worker", reason="Evicted")
    eventually(
        lambda: (
            (pod := pods_of(cluster, namespace).get("rj-workers-1"))
            and pod["metadata"]["uid"] != old_uid
        ),
        what="the worker recreated",
    )
    counted = eventually(lambda: restarts_of(cluster.get(path), upstream), what="restart counted")
    assert counted == 1

    # Suspended: every pod and the submitter's Job go, the RayJob stays; resumed: the head
    # comes back first.
    cluster.patch(path, {"spec": {"suspend": True}})
    eventually(lambda: pods_of(cluster, namespace) == {}, what="pods deleted on suspend")
    eventually(lambda: jobs_of(cluster, namespace) == {}, what="the Job deleted on suspend")
    eventually(
        lambda: cluster.get(path)["status"].get("jobDeploymentStatus") == "Suspended",
        what="Suspended",
    )
    cluster.patch(path, {"spec": {"suspend": False}})
    pods_are({"rj-head-0"})
    cluster.delete(path)


def test_the_submitters_job_failing_fails_the_rayjob_with_submission_failed(
    cluster: Cluster, operator: Operator, namespace: str, kubelet: Kubelet
) -> None:
    manifest = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    manifest["metadata"]["name"] = "rjf"
    manifest["spec"]["submitterConfig"] = {"backoffLimit": 1}
    manifest["spec"]["shutdownAfterJobFinishes"] = True
    cluster.create(job_path("RayJob", namespace, upstream=True), manifest)
    path = job_path("RayJob", namespace, "rjf", upstream=True)
    for stage in ({"rjf-head-0"}, {"rjf-workers-0", "rjf-workers-1"}):
        eventually(lambda s=stage: s <= set(pods_of(cluster, namespace)), what=str(stage))
        for name in stage:
            kubelet.set(name, "Running", container=CONTAINERS[name.split("-")[1]])
    submitter = eventually(lambda: jobs_of(cluster, namespace).get("rjf"), what="the Job")
    assert submitter["spec"]["backoffLimit"] == 1

    # One pod failed and retried by the Job controller: counted, nothing decided yet.
    set_job_status(cluster, namespace, "rjf", {"active": 1, "failed": 1, "startTime": now_stamp()})
    eventually(
        lambda: restarts_of(cluster.get(path), True, "Submitter") == 1,
        what="the Job's failed pod counted",
    )
    assert cluster.get(path)["status"].get("jobDeploymentStatus") != "Failed"
    # The Job controller gives up: the RayJob fails as KubeRay's does, and (shutdown after
    # the end) its cluster and the Job go.
    set_job_status(
        cluster,
        namespace,
        "rjf",
        {
            "active": 0,
            "failed": 2,
            "startTime": now_stamp(),
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "BackoffLimitExceeded",
                    "message": "Job has reached the specified backoff limit",
                    "lastTransitionTime": now_stamp(),
                }
            ],
        },
    )
    status = eventually(
        lambda: (s := cluster.get(path)["status"]).get("jobDeploymentStatus") == "Failed" and s,
        what="the RayJob Failed",
    )
    assert status["reason"] == "SubmissionFailed"
    assert "BackoffLimitExceeded" in status["message"]
    assert "Job has reached the specified backoff limit" in status["message"]
    failed = condition(cluster.get(path), "Failed")
    assert failed is not None and failed["reason"] == "SubmissionFailed"
    eventually(lambda: pods_of(cluster, namespace) == {}, what="the cluster shut down")
    eventually(lambda: jobs_of(cluster, namespace) == {}, what="the Job deleted")
    assert cluster.get(path)["status"]["jobDeploymentStatus"] == "Failed"
    cluster.delete(path)


def test_a_rayjob_the_operator_is_given_is_checked_before_any_pod(
    cluster: Cluster, operator: Operator, namespace: str
) -> None:
    manifest = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    manifest = copy.deepcopy(manifest)
    manifest["metadata"]["name"] = "rj-bad"
    manifest["spec"]["submissionMode"] = "InteractiveMode"
    # The CRD's schema (generated from the model) has KubeRay's modes kubemill runs only.
    with pytest.raises(ApiError, match="submissionMode") as refused:
        cluster.create(job_path("RayJob", namespace, upstream=True), manifest)
    assert refused.value.status == 422
    assert pods_of(cluster, namespace) == {}
