"""A replica run through a child controller (``ReplicaPlan.controller``), on the operator's
side: created as a batch/v1 Job whose pod template is the replica's pod, owned by the job;
its status read back from the Job (a ready pod: the replica Running); deleted with its pods
(``propagationPolicy: Background``) when the core deletes the replica (suspended, or
stopped by ``kubemill interrupt``'s annotation). A RayJob's submitter
is such a replica (against kmock, which has no Job controller: the test writes the Job's
status as that controller would; tests/engines/ray/test_rayjob_operator.py has the RayJob's
side, tests/cluster/test_ray_real.py the real Job controller)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kubemill.api import STOP_ANNOTATION
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

EXAMPLE = Path(__file__).parents[4] / "examples" / "ray" / "rayjob-sum.yaml"
CONTAINERS = {"head": "ray-head", "workers": "ray-worker"}


def _jobs(cluster: Cluster, namespace: str) -> dict[str, dict[str, Any]]:
    found = cluster.list(f"/apis/batch/v1/namespaces/{namespace}/jobs")
    return {j["metadata"]["name"]: j for j in found}


def _pods(cluster: Cluster, namespace: str) -> set[str]:
    return {p["metadata"]["name"] for p in cluster.list(f"/api/v1/namespaces/{namespace}/pods")}


def _up_to_the_job(
    cluster: Cluster, namespace: str, kubelet: Kubelet, name: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The RayJob ``name`` created, its nodes Running: (the RayJob, its Job)."""
    manifest = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    manifest["metadata"]["name"] = name
    created = cluster.create(job_path("RayJob", namespace), manifest)
    for stage in ({f"{name}-head-0"}, {f"{name}-workers-0", f"{name}-workers-1"}):
        eventually(lambda s=stage: s <= _pods(cluster, namespace), what=str(sorted(stage)))
        for pod in sorted(stage):
            kubelet.set(pod, "Running", container=CONTAINERS[pod.split("-")[1]])
    job = eventually(lambda: _jobs(cluster, namespace).get(name), what="the Job")
    return created, job


def test_the_replica_is_a_job_read_back_and_deleted_with_its_pods(
    cluster: Cluster, operator: Operator, namespace: str, kubelet: Kubelet
) -> None:
    created, job = _up_to_the_job(cluster, namespace, kubelet, "cc")
    path = job_path("RayJob", namespace, "cc")
    assert job["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    template = job["spec"]["template"]
    assert "name" not in template["metadata"] and "ownerReferences" not in template["metadata"]
    assert template["metadata"]["labels"]["kubemill.dev/replica-type"] == "submitter"
    assert _pods(cluster, namespace) == {"cc-head-0", "cc-workers-0", "cc-workers-1"}
    assert not is_true(cluster.get(path), "Running")  # the Job has no ready pod yet

    # The Job controller reports a ready pod: the replica is Running, and so the job.
    status = {"active": 1, "ready": 1, "startTime": now_stamp()}
    cluster.patch(f"/apis/batch/v1/namespaces/{namespace}/jobs/cc/status", {"status": status})
    eventually(lambda: is_true(cluster.get(path), "Running"), what="Running")
    replicas = cluster.get(path)["status"]["replicaStatuses"]
    assert replicas["Submitter"]["active"] == 1

    # Suspended: the core deletes the replica, i.e. the Job and (in the background) its pods.
    cluster.patch(path, {"spec": {"suspend": True}})
    eventually(lambda: _jobs(cluster, namespace) == {}, what="the Job deleted")
    deletes = [
        c
        for c in cluster.operator_calls(namespace=namespace)
        if c.method == "DELETE" and c.plural == "jobs"
    ]
    assert [c.name for c in deletes] == ["cc"]
    assert deletes[0].body["propagationPolicy"] == "Background"
    assert deletes[0].body["preconditions"]["uid"] == job["metadata"]["uid"]
    cluster.delete(path)


def test_a_stopped_job_has_its_replicas_job_deleted(
    cluster: Cluster, operator: Operator, namespace: str, kubelet: Kubelet
) -> None:
    _up_to_the_job(cluster, namespace, kubelet, "cs")
    path = job_path("RayJob", namespace, "cs")
    # kubemill interrupt's annotation: Failed (Interrupted), every active replica stopped,
    # the one run through the Job included.
    cluster.patch(path, {"metadata": {"annotations": {STOP_ANNOTATION: "test"}}})
    eventually(lambda: _jobs(cluster, namespace) == {}, what="the Job deleted")
    failed = eventually(lambda: condition(cluster.get(path), "Failed"), what="Failed")
    assert failed["reason"] == "Interrupted"
    cluster.delete(path)
