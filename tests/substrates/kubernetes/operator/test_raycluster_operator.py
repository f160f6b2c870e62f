"""The operator runs a RayCluster, in kubemill's group and KubeRay's: the head pod and its
Service exactly as ``kubemill render`` prints them, the workers once the head is ready,
``RayClusterProvisioned`` and KubeRay's status fields decided by the core, a patch of a
evicted worker seen as ReplicaFailure and recreated, a patch of a group's replicas adding a
pod, and a suspend deleting them all (against kmock, one operator
for the module, as in test_v1_kinds_operator)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubemill.kinds import load_one
from kubemill.substrates.kubernetes.operator.reconciler import RESTARTS_ANNOTATION
from kubemill.substrates.kubernetes.render import render_job
from support.operator_support import Cluster, Kubelet, Operator, condition, is_true, job_path
from support.waiting import eventually


def ray_cluster(api_version: str) -> dict[str, Any]:
    def template(container: str) -> dict[str, Any]:
        return {"spec": {"containers": [{"name": container, "image": "rayproject/ray:2.60.0"}]}}

    return {
        "apiVersion": api_version,
        "kind": "RayCluster",
        "metadata": {"name": "rc"},
        "spec": {
            "headGroupSpec": {"rayStartParams": {"num-cpus": "0"}, "template": template("head")},
            "workerGroupSpecs": [
                {
                    "groupName": "workers",
                    "replicas": 2,
                    "maxReplicas": 3,
                    "rayStartParams": {},
                    "template": template("worker"),
                }
            ],
        },
    }


def pods_of(cluster: Cluster, namespace: str) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in cluster.list(f"/api/v1/namespaces/{namespace}/pods")}


@pytest.mark.parametrize("upstream", [False, True], ids=["kubemill", "kuberay"])
def test_the_operator_runs_a_ray_cluster_as_rendered_until_suspended(
    cluster: Cluster, operator: Operator, namespace: str, kubelet: Kubelet, upstream: bool
) -> None:
    api_version = "ray.io/v1" if upstream else "kubemill.dev/v1"
    created = cluster.create(
        job_path("RayCluster", namespace, upstream=upstream), ray_cluster(api_version)
    )
    path = job_path("RayCluster", namespace, "rc", upstream=upstream)
    rendered = {o["metadata"]["name"]: o for o in render_job(load_one(created))}

    # The head and its Service first; the workers wait for the head to be ready.
    head = eventually(lambda: pods_of(cluster, namespace).get("rc-head-0"), what="the head pod")
    assert head["spec"] == rendered["rc-head-0"]["spec"]
    owner = head["metadata"]["ownerReferences"][0]
    assert (owner["apiVersion"], owner["uid"]) == (api_version, created["metadata"]["uid"])
    service = eventually(
        lambda: cluster.get_or_none(f"/api/v1/namespaces/{namespace}/services/rc-head-svc"),
        what="the head Service",
    )
    assert service["spec"]["ports"] == rendered["rc-head-svc"]["spec"]["ports"]
    assert set(pods_of(cluster, namespace)) == {"rc-head-0"}
    kubelet.set("rc-head-0", "Running", container="head", ready=False)
    eventually(
        lambda: cluster.get(path)["status"]["replicaStatuses"]["Head"]["active"] == 1,
        what="the head counted active",
    )
    assert condition(cluster.get(path), "HeadPodReady")["status"] == "False"
    assert set(pods_of(cluster, namespace)) == {"rc-head-0"}  # not ready: no worker yet

    kubelet.set("rc-head-0", "Running", container="head")
    workers = {"rc-workers-0", "rc-workers-1"}
    eventually(lambda: workers <= set(pods_of(cluster, namespace)), what="the workers")
    for name in workers:
        assert pods_of(cluster, namespace)[name]["spec"] == rendered[name]["spec"]
        kubelet.set(name, "Running", container="worker")
    ready = eventually(
        lambda: (job := cluster.get(path)) and is_true(job, "RayClusterProvisioned") and job,
        what="RayClusterProvisioned",
    )
    status = ready["status"]
    assert (status["state"], status["readyWorkerReplicas"], status["desiredWorkerReplicas"]) == (
        "ready",
        2,
        2,
    )
    assert condition(ready, "HeadPodReady")["status"] == "True"
    assert status["endpoints"] == {
        "gcs-server": "6379",
        "dashboard": "8265",
        "client": "10001",
        "metrics": "8080",
    }
    assert status["head"]["serviceName"] == "rc-head-svc"
    assert not is_true(ready, "Succeeded") and "Ready" not in {
        c["type"] for c in status["conditions"]
    }  # KubeRay's word for it

    # A worker evicted: KubeRay's ReplicaFailure, the pod recreated, its restart counted (in
    # KubeRay's group in the annotation kubemill keeps restart counts in there).
    old_uid = pods_of(cluster, namespace)["rc-workers-1"]["metadata"]["uid"]
    kubelet.set("rc-workers-1", "Failed", container="worker", reason="Evicted")
    failed = eventually(
        lambda: (job := cluster.get(path)) and is_true(job, "ReplicaFailure") and job,
        what="ReplicaFailure",
    )
    if upstream:
        recorded = json.loads(failed["metadata"]["annotations"][RESTARTS_ANNOTATION])
        assert recorded == {"workers": {"restarts": 1, "retiredRestarts": 1}}
    else:
        assert failed["status"]["replicaStatuses"]["workers"]["restarts"] == 1
    recreated = eventually(
        lambda: (
            (pod := pods_of(cluster, namespace).get("rc-workers-1"))
            and pod["metadata"]["uid"] != old_uid
        ),
        what="the worker recreated",
    )
    assert recreated
    kubelet.set("rc-workers-1", "Running", container="worker")
    eventually(
        lambda: cluster.get(path)["status"].get("readyWorkerReplicas") == 2, what="2 ready again"
    )

    # A group's replicas patched: one more worker.
    cluster.patch(
        path,
        {"spec": {"workerGroupSpecs": [{**created["spec"]["workerGroupSpecs"][0], "replicas": 3}]}},
    )
    eventually(lambda: "rc-workers-2" in pods_of(cluster, namespace), what="a third worker")

    # Suspended: every pod goes, the object stays.
    cluster.patch(path, {"spec": {"suspend": True}})
    eventually(lambda: not pods_of(cluster, namespace), what="no pod left")
    suspended = eventually(
        lambda: (job := cluster.get(path)) and job["status"].get("state") == "suspended" and job,
        what="state suspended",
    )
    assert is_true(suspended, "Suspended") and "endpoint" not in suspended["status"]
