"""A TrainJob under the real operator (a subprocess) against the strict test API server, in
Kubeflow Trainer's own group (``--serve-upstream-groups``): the nodes' pods carry torchrun's
variables, the job is Complete (upstream's condition) once every node has succeeded, and
``status.jobsStatus`` says so."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubemill.substrates.kubernetes.restarts import RESTARTS_ANNOTATION as RESTARTS
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


def trainjob(name: str, api_version: str = "trainer.kubeflow.org/v1alpha1") -> dict[str, Any]:
    return {
        "apiVersion": api_version,
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


@pytest.mark.parametrize("upstream", [True, False], ids=["trainer.kubeflow.org", "kubemill.dev"])
def test_the_operator_runs_a_trainjob(cluster: Cluster, tmp_path: Path, upstream: bool) -> None:
    namespace = cluster.namespace()
    pods = f"/api/v1/namespaces/{namespace}/pods"
    manifest = trainjob("tj") if upstream else trainjob("tj", "kubemill.dev/v1")
    with running_operator(cluster, tmp_path, "--all-namespaces", "--serve-upstream-groups"):
        cluster.create(job_path("TrainJob", namespace, upstream=upstream), manifest)
        path = job_path("TrainJob", namespace, "tj", upstream=upstream)

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
        # A node restarted in place is counted: in the status, or in Kubeflow's group (whose
        # status schema has no restart counts) in the job's annotation.
        kubelet.set("tj-node-1", "Running", container="node", restart_count=1)

        def counted() -> bool:
            job = cluster.get(path)
            if upstream:
                return '"restarts":1' in json.dumps(
                    json.loads(job["metadata"].get("annotations", {}).get(RESTARTS, "{}")),
                    separators=(",", ":"),
                )
            return job["status"]["replicaStatuses"]["node"].get("restarts") == 1

        eventually(counted, what="the restart counted")
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
