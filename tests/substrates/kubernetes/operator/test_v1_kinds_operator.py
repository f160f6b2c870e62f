"""The operator runs JAXJob, XGBoostJob and PaddleJob, in kubemill's group and Kubeflow's:
pods exactly as ``kubemill render`` prints them (the framework's env included), and each
kind's own success rule deciding the job, against kmock (one operator for the module, as in
test_lifecycle).
"""

from __future__ import annotations

from typing import Any

import pytest

from kubemill.kinds import load_one
from kubemill.substrates.kubernetes.render import render_job
from support.operator_jobs import replica_job
from support.operator_support import Cluster, Kubelet, Operator, is_true, job_path
from support.waiting import eventually

CASES = [
    # kind, replicas, the env names every replica gets, the replicas whose success (in
    # this order) decides the job, and one replica still running when it does
    (
        "JAXJob",
        {"Worker": 2},
        {"COORDINATOR_ADDRESS", "COORDINATOR_PORT", "NUM_PROCESSES", "PROCESS_ID"},
        ["w-worker-0", "w-worker-1"],
        None,
    ),
    (
        "XGBoostJob",
        {"Master": 1, "Worker": 1},
        {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "WORKER_ADDRS", "WORKER_PORT"},
        ["w-master-0"],
        "w-worker-0",
    ),
    (
        "PaddleJob",
        {"Master": 1, "Worker": 1},
        {"PADDLE_MASTER", "PADDLE_NNODES", "PADDLE_JOB_ID"},
        ["w-master-0"],
        "w-worker-0",
    ),
]


def pods_of(cluster: Cluster, namespace: str) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in cluster.list(f"/api/v1/namespaces/{namespace}/pods")}


@pytest.mark.parametrize("upstream", [False, True], ids=["kubemill", "kubeflow"])
@pytest.mark.parametrize(
    ("kind", "replicas", "names", "deciders", "bystander"),
    [pytest.param(*case, id=case[0]) for case in CASES],
)
def test_the_operator_runs_the_kind_as_rendered_and_its_success_rule_decides(
    cluster: Cluster,
    operator: Operator,
    namespace: str,
    kubelet: Kubelet,
    upstream: bool,
    kind: str,
    replicas: dict[str, int],
    names: set[str],
    deciders: list[str],
    bystander: str | None,
) -> None:
    api_version = "kubeflow.org/v1" if upstream else "kubemill.dev/v1"
    manifest, container = replica_job(kind, "w", replicas, api_version=api_version)
    created = cluster.create(job_path(kind, namespace, upstream=upstream), manifest)
    path = job_path(kind, namespace, "w", upstream=upstream)
    expected = {f"w-{t.lower()}-{i}" for t, n in replicas.items() for i in range(n)}
    pods = eventually(
        lambda: (found := pods_of(cluster, namespace)) and set(found) == expected and found,
        what=f"pods {sorted(expected)}",
    )
    rendered = {
        o["metadata"]["name"]: o for o in render_job(load_one(created)) if o["kind"] == "Pod"
    }
    for name, pod in pods.items():
        assert pod["spec"] == rendered[name]["spec"], name
        env = {e["name"] for e in pod["spec"]["containers"][0]["env"]}
        assert names <= env, (name, sorted(env))
        owner = pod["metadata"]["ownerReferences"][0]
        assert (owner["apiVersion"], owner["uid"]) == (api_version, created["metadata"]["uid"])

    for name in pods:
        kubelet.set(name, "Running", container=container)
    eventually(lambda: is_true(cluster.get(path), "Running"), what="Running")

    *first, last = deciders
    for name in first:
        kubelet.set(name, "Succeeded", container=container, exit_code=0)
    if first:
        # Not every replica the rule needs has succeeded: the job still runs.
        eventually(
            lambda: cluster.get(path)["status"]["replicaStatuses"]["Worker"]["succeeded"] == 1,
            what="one worker counted as succeeded",
        )
        assert not is_true(cluster.get(path), "Succeeded")
    kubelet.set(last, "Succeeded", container=container, exit_code=0)
    job = eventually(
        lambda: (j := cluster.get(path)) and is_true(j, "Succeeded") and j, what="Succeeded"
    )
    if bystander is not None:
        # The decider's success is the job's while another replica still runs (and, under
        # cleanPodPolicy None, keeps running).
        assert pods_of(cluster, namespace)[bystander]["status"]["phase"] == "Running"
    assert job["status"]["completionTime"]
