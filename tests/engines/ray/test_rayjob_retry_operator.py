"""The operator retries a RayJob (``backoffLimit``) on a new cluster, as KubeRay does, against
kmock: a stand-in for the head's job API on loopback (the head pod reported Running and
ready at 127.0.0.1, its ``dashboard-port`` the stand-in's) says the Ray job FAILED; every pod
and the submitter's Job go, ``failed`` is 1 and the deployment ``Retrying``; the cluster
comes back stage by stage as new pods (new uids), the stand-in now answering for the new
head, and its SUCCEEDED completes the RayJob with ``failed`` 1 and ``succeeded`` 1. The
old head's FAILED is not counted twice. A submitter's Job failing for good is retried the
same way, the new Job starting with its full ``backoffLimit``, and the last failure is final.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubemill.substrates.kubernetes.operator.reconciler import RESTARTS_ANNOTATION
from support.operator_support import Cluster, Kubelet, Operator, condition, job_path, now_stamp
from support.ray_job_api import RayJobApi, serving_ray_job_api
from support.waiting import eventually

EXAMPLE = Path(__file__).parents[3] / "examples" / "ray" / "rayjob-sum.yaml"
CONTAINERS = {"head": "ray-head", "workers": "ray-worker"}


@pytest.fixture
def job_api() -> Iterator[int]:
    with serving_ray_job_api() as port:
        yield port


def _pods(cluster: Cluster, namespace: str) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in cluster.list(f"/api/v1/namespaces/{namespace}/pods")}


def _jobs(cluster: Cluster, namespace: str) -> dict[str, dict[str, Any]]:
    found = cluster.list(f"/apis/batch/v1/namespaces/{namespace}/jobs")
    return {j["metadata"]["name"]: j for j in found}


def _manifest(name: str, dashboard: int, backoff: int) -> dict[str, Any]:
    manifest = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    manifest["metadata"]["name"] = name
    manifest["spec"]["backoffLimit"] = backoff
    manifest["spec"]["submitterConfig"] = {"backoffLimit": 1}
    head = manifest["spec"]["rayClusterSpec"]["headGroupSpec"]
    head.setdefault("rayStartParams", {})["dashboard-port"] = str(dashboard)
    return manifest


def _bring_up(cluster: Cluster, kubelet: Kubelet, namespace: str, name: str) -> dict[str, str]:
    """Each stage Running once created (the head at 127.0.0.1); the pods' uids by name."""
    head = f"{name}-head-0"
    for stage in ({head}, {f"{name}-workers-0", f"{name}-workers-1"}):
        eventually(lambda s=stage: s <= set(_pods(cluster, namespace)), what=str(stage))
        for pod in stage:
            kubelet.set(pod, "Running", container=CONTAINERS[pod.split("-")[1]])
        if head in stage:
            path = f"/api/v1/namespaces/{namespace}/pods/{head}"
            cluster.patch(f"{path}/status", {"status": {"podIP": "127.0.0.1"}})
    eventually(
        lambda: name in _jobs(cluster, namespace),
        what="the submitter's Job",
    )
    return {n: p["metadata"]["uid"] for n, p in _pods(cluster, namespace).items()}


def test_a_failed_ray_job_is_retried_on_a_new_cluster_and_its_success_completes_the_rayjob(
    cluster: Cluster, operator: Operator, namespace: str, kubelet: Kubelet, job_api: int
) -> None:
    name = "rjr"
    cluster.create(job_path("RayJob", namespace, upstream=True), _manifest(name, job_api, 2))
    path = job_path("RayJob", namespace, name, upstream=True)
    first = _bring_up(cluster, kubelet, namespace, name)
    old_job = _jobs(cluster, namespace)[name]["metadata"]["uid"]
    RayJobApi.answer = {"status": "FAILED", "message": "ValueError: first try"}

    def retried() -> dict[str, Any] | None:
        status = cluster.get(path).get("status", {})
        return status if status.get("failed") == 1 else None

    status = eventually(retried, what="the first attempt counted failed")
    assert status["jobDeploymentStatus"] in ("Retrying", "Initializing"), status
    assert status.get("succeeded") == 0
    restarting = condition(cluster.get(path), "Restarting")
    assert restarting is not None and "retry 1 of 2" in restarting["message"]
    assert "ValueError: first try" in restarting["message"]
    # The old cluster goes: every pod of the attempt and the submitter's Job.
    eventually(
        lambda: (
            not any(
                p["metadata"]["uid"] in first.values() for p in _pods(cluster, namespace).values()
            )
        ),
        what="the first attempt's pods gone",
    )
    eventually(
        lambda: _jobs(cluster, namespace).get(name, {}).get("metadata", {}).get("uid") != old_job,
        what="the first attempt's Job gone",
    )
    # The new head does not know the job yet; then Ray says it succeeded.
    RayJobApi.answer = None
    second = _bring_up(cluster, kubelet, namespace, name)
    assert not set(second.values()) & set(first.values())  # a new cluster: new pods
    assert _jobs(cluster, namespace)[name]["metadata"]["uid"] != old_job
    asked = RayJobApi.asked
    eventually(lambda: RayJobApi.asked > asked, what="the new head asked")
    assert cluster.get(path)["status"]["failed"] == 1  # the old FAILED not counted again
    RayJobApi.answer = {"status": "SUCCEEDED", "message": "done"}
    status = eventually(
        lambda: (s := cluster.get(path)["status"]).get("jobDeploymentStatus") == "Complete" and s,
        what="Complete",
    )
    assert (status["failed"], status["succeeded"]) == (1, 1)
    assert status["jobStatus"] == "SUCCEEDED"
    cluster.delete(path)


def _submitter_restarts(job: dict[str, Any]) -> int:
    """The submitter's restarts as the operator records them in KubeRay's group (an
    annotation: KubeRay's status schema has no place for them)."""
    recorded = json.loads(job["metadata"].get("annotations", {}).get(RESTARTS_ANNOTATION, "{}"))
    return int(recorded.get("Submitter", {}).get("restarts", 0))


def _gone(cluster: Cluster, namespace: str, name: str, pods: dict[str, str], job_uid: str) -> None:
    """Wait until the attempt's pods (uids by name) and its Job (``job_uid``) are gone."""
    eventually(
        lambda: (
            not set(pods.values())
            & {p["metadata"]["uid"] for p in _pods(cluster, namespace).values()}
        ),
        what="the failed attempt's pods gone",
    )
    eventually(
        lambda: _jobs(cluster, namespace).get(name, {}).get("metadata", {}).get("uid") != job_uid,
        what="the failed attempt's Job gone",
    )


def test_the_submitter_failing_is_retried_with_a_new_job_then_fails_for_good(
    cluster: Cluster, operator: Operator, namespace: str, kubelet: Kubelet, job_api: int
) -> None:
    name = "rjs"
    cluster.create(job_path("RayJob", namespace, upstream=True), _manifest(name, job_api, 1))
    path = job_path("RayJob", namespace, name, upstream=True)
    gave_up = {
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
    }

    def failed_count() -> int:
        return int(cluster.get(path).get("status", {}).get("failed", 0))

    first = _bring_up(cluster, kubelet, namespace, name)
    old_job = _jobs(cluster, namespace)[name]
    assert old_job["spec"]["backoffLimit"] == 1
    job_status = f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}/status"
    cluster.patch(job_status, {"status": gave_up})
    eventually(lambda: failed_count() == 1, what="the first attempt counted failed")
    _gone(cluster, namespace, name, first, old_job["metadata"]["uid"])
    _bring_up(cluster, kubelet, namespace, name)
    # A new Job with its full limit (KubeRay's new submitter Job): its first failure is
    # retried by it, not the RayJob's end.
    new_job = _jobs(cluster, namespace)[name]
    assert new_job["metadata"]["uid"] != old_job["metadata"]["uid"]
    assert new_job["spec"]["backoffLimit"] == 1
    cluster.patch(job_status, {"status": {"active": 1, "failed": 1, "startTime": now_stamp()}})
    eventually(lambda: _submitter_restarts(cluster.get(path)) == 1, what="its failure counted")
    assert failed_count() == 1
    cluster.patch(job_status, {"status": gave_up})
    status = eventually(
        lambda: (s := cluster.get(path)["status"]).get("jobDeploymentStatus") == "Failed" and s,
        what="Failed for good",
    )
    assert status["reason"] == "SubmissionFailed"
    assert (status["failed"], status["succeeded"]) == (2, 0)
    cluster.delete(path)
