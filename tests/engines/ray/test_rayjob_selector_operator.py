"""The operator runs a RayJob on an existing RayCluster (``clusterSelector``): it waits,
Initializing and saying why, while the cluster does not exist or is not Ready; the cluster
becoming Ready wakes it (a change of the cluster reconciles the RayJobs that select it):
the submitter's Job goes against the cluster's head Service and Ray's job API is asked at
the head pod's IP; Ray's verdict completes it, and the cluster's pods are never touched. A
cluster deleted under a running RayJob fails it (``RayClusterDeleted``).

Against kmock, one operator for the module; the head's job API is a stand-in on loopback
(``GET /api/jobs/<id>``, as Ray's) at the port the cluster's ``dashboard-port`` names, the
head pod reported Running and ready at 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.operator_support import Cluster, Kubelet, Operator, job_path
from support.ray_job_api import RayJobApi, serving_ray_job_api
from support.waiting import eventually

EXAMPLES = Path(__file__).parents[3] / "examples" / "ray"
HOST = "127.0.0.1"


@pytest.fixture
def job_api() -> Iterator[int]:
    with serving_ray_job_api() as port:
        yield port


def _example(name: str) -> dict[str, Any]:
    loaded = yaml.safe_load((EXAMPLES / name).read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def _rayjob(name: str, mode: str = "K8sJobMode") -> dict[str, Any]:
    doc = _example("rayjob-sum.yaml")
    doc["metadata"] = {"name": name}
    del doc["spec"]["rayClusterSpec"]
    doc["spec"]["clusterSelector"] = {"ray.io/cluster": "shared"}
    doc["spec"]["submissionMode"] = mode
    doc["spec"]["jobId"] = name
    return doc


def _raycluster(dashboard: int) -> dict[str, Any]:
    doc = _example("raycluster.yaml")
    doc["metadata"] = {"name": "shared"}
    doc["spec"]["headGroupSpec"]["rayStartParams"]["dashboard-port"] = str(dashboard)
    doc["spec"]["workerGroupSpecs"] = []  # a head alone serves the job API
    return doc


def _status(cluster: Cluster, path: str) -> dict[str, Any]:
    return dict(cluster.get(path).get("status") or {})


def _jobs(cluster: Cluster, namespace: str) -> dict[str, dict[str, Any]]:
    found = cluster.list(f"/apis/batch/v1/namespaces/{namespace}/jobs")
    return {j["metadata"]["name"]: j for j in found}


def test_a_rayjob_waits_for_the_selected_cluster_then_runs_on_it_and_leaves_it(
    cluster: Cluster, operator: Operator, namespace: str, kubelet: Kubelet, job_api: int
) -> None:
    path = job_path("RayJob", namespace, "rj-sel", upstream=True)
    cluster.create(job_path("RayJob", namespace, upstream=True), _rayjob("rj-sel"))
    waiting = eventually(
        lambda: (s := _status(cluster, path)).get("message", "").startswith("waiting") and s,
        what="the RayJob waiting for its cluster",
    )
    assert waiting["jobDeploymentStatus"] == "Initializing"
    assert "RayCluster shared" in waiting["message"] and "does not exist" in waiting["message"]
    assert waiting["rayClusterName"] == "shared"
    assert _jobs(cluster, namespace) == {}

    # The cluster appears; its head pod Running and ready at 127.0.0.1 makes it Ready.
    cluster_path = job_path("RayCluster", namespace, "shared", upstream=True)
    cluster.create(job_path("RayCluster", namespace, upstream=True), _raycluster(job_api))
    head = "shared-head-0"
    head_path = f"/api/v1/namespaces/{namespace}/pods/{head}"
    eventually(lambda: cluster.get_or_none(head_path), what="the cluster's head pod")
    assert _jobs(cluster, namespace) == {}  # not Ready yet: still waiting
    kubelet.set(head, "Running", container="ray-head")
    cluster.patch(f"{head_path}/status", {"status": {"podIP": HOST}})
    eventually(lambda: _status(cluster, cluster_path).get("state") == "ready", what="cluster Ready")
    submitter = eventually(
        lambda: _jobs(cluster, namespace).get("rj-sel"), what="the submitter's Job"
    )
    command = submitter["spec"]["template"]["spec"]["containers"][0]["command"]
    assert f"http://shared-head-svc.{namespace}.svc.cluster.local:{job_api}" in command
    image = submitter["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == "rayproject/ray:2.60.0"  # the selected head's, as KubeRay's
    running = eventually(
        lambda: (s := _status(cluster, path)).get("jobDeploymentStatus") == "Running" and s,
        what="Running",
    )
    assert running["dashboardURL"] == f"shared-head-svc.{namespace}.svc.cluster.local:{job_api}"

    # Ray's job API (asked at the head pod's IP) says it succeeded: Complete.
    RayJobApi.jobs["rj-sel"] = {"status": "SUCCEEDED", "message": "done"}
    done = eventually(
        lambda: (s := _status(cluster, path)).get("jobDeploymentStatus") == "Complete" and s,
        what="Complete",
    )
    assert done["jobStatus"] == "SUCCEEDED"
    # shutdownAfterJobFinishes: nothing of the selected cluster goes, it stays Ready.
    assert cluster.get_or_none(head_path) is not None
    assert _status(cluster, cluster_path).get("state") == "ready"
    assert not cluster.get(cluster_path)["metadata"].get("deletionTimestamp")

    # A second RayJob running on it when the cluster is deleted fails with the reason.
    other = job_path("RayJob", namespace, "rj-lost", upstream=True)
    cluster.create(job_path("RayJob", namespace, upstream=True), _rayjob("rj-lost", "HTTPMode"))
    RayJobApi.jobs["rj-lost"] = {"status": "RUNNING"}
    eventually(
        lambda: _status(cluster, other).get("jobStatus") == "RUNNING", what="rj-lost running"
    )
    cluster.delete(cluster_path)
    failed = eventually(
        lambda: (s := _status(cluster, other)).get("jobDeploymentStatus") == "Failed" and s,
        what="rj-lost failed",
    )
    assert failed["reason"] == "RayClusterDeleted"
    assert "RayCluster shared was deleted" in failed["message"]
