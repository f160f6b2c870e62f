"""A TrainJob under the real operator (a subprocess) against the strict test API server, in
Kubeflow Trainer's own group (``--serve-upstream-groups``): the nodes' pods carry torchrun's
variables, the job is Complete (upstream's condition) once every node has succeeded, and
``status.jobsStatus`` says so."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.operator_support import (
    Cluster,
    Kubelet,
    is_true,
    job_path,
    running_cluster,
    running_operator,
)
from support.waiting import eventually


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with running_cluster() as served:
        yield served


def trainjob(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {
                "image": "pytorch/pytorch:2.7.1-cuda12.6-cudnn9-runtime",
                "command": ["torchrun", "train.py"],
                "numNodes": 2,
            },
        },
    }


def test_the_operator_runs_an_upstream_trainjob(cluster: Cluster, tmp_path: Path) -> None:
    namespace = cluster.namespace()
    pods = f"/api/v1/namespaces/{namespace}/pods"
    with running_operator(cluster, tmp_path, "--all-namespaces", "--serve-upstream-groups"):
        cluster.create(job_path("TrainJob", namespace, upstream=True), trainjob("tj"))
        path = job_path("TrainJob", namespace, "tj", upstream=True)

        def pod_names() -> set[str]:
            return {p["metadata"]["name"] for p in cluster.list(pods)}

        eventually(lambda: pod_names() == {"tj-node-0", "tj-node-1"}, what="the nodes' pods")
        for rank in (0, 1):
            (container,) = cluster.get(f"{pods}/tj-node-{rank}")["spec"]["containers"]
            env = {e["name"]: e.get("value") for e in container["env"]}
            assert env["PET_NODE_RANK"] == str(rank)
            assert (env["PET_NNODES"], env["PET_NPROC_PER_NODE"]) == ("2", "auto")
            assert (env["PET_MASTER_ADDR"], env["PET_MASTER_PORT"]) == ("tj-node-0", "29500")

        kubelet = Kubelet(cluster, namespace)
        for rank in (0, 1):
            kubelet.set(f"tj-node-{rank}", "Running", container="node")
        eventually(
            lambda: cluster.get(path)["status"]["replicaStatuses"]["node"]["active"] == 2,
            what="both nodes active",
        )
        kubelet.set("tj-node-0", "Succeeded", container="node", exit_code=0)
        # One node done is not the job done: every node must succeed.
        eventually(
            lambda: cluster.get(path)["status"]["replicaStatuses"]["node"]["succeeded"] == 1,
            what="one node counted",
        )
        assert not is_true(cluster.get(path), "Complete")
        kubelet.set("tj-node-1", "Succeeded", container="node", exit_code=0)
        done = eventually(
            lambda: (job := cluster.get(path)) and is_true(job, "Complete") and job,
            what="Complete",
        )
        # Upstream's words: Complete, and no Created/Running/Restarting, which it lacks.
        assert [(c["type"], c["reason"]) for c in done["status"]["conditions"]] == [
            ("Complete", "AllJobsCompleted")
        ]
        assert done["status"]["jobsStatus"] == [
            {"name": "node", "ready": 1, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
        ]
