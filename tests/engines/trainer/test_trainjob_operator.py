"""A TrainJob under the real operator (a subprocess) against the strict test API server, in
Kubeflow Trainer's own group (``--serve-upstream-groups``): the nodes' pods carry torchrun's
variables, the job is Complete (upstream's condition) once every node has succeeded, and
``status.jobsStatus`` says so. The operator resolves runtimes from the cluster's
TrainingRuntimes and ClusterTrainingRuntimes, as they are applied and deleted."""

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
from support.trainer_runtimes import echo_runtime, naming
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


RUNTIMES = "/apis/trainer.kubeflow.org/v1alpha1"


def test_the_operator_resolves_runtimes_from_the_cluster(cluster: Cluster, tmp_path: Path) -> None:
    namespace = cluster.namespace()
    pods = f"/api/v1/namespaces/{namespace}/pods"
    jobs = job_path("TrainJob", namespace, upstream=True)
    cluster.create(f"{RUNTIMES}/clustertrainingruntimes", echo_runtime("echo-cluster", "c"))
    cluster.create(
        f"{RUNTIMES}/namespaces/{namespace}/trainingruntimes",
        echo_runtime("echo-team", "t", namespace=namespace),
    )

    def commands() -> dict[str, list[str]]:
        return {
            p["metadata"]["name"]: p["spec"]["containers"][0]["command"] for p in cluster.list(pods)
        }

    with running_operator(cluster, tmp_path, "--all-namespaces", "--serve-upstream-groups"):
        # Runtimes there before the operator started: known at its first pass.
        cluster.create(jobs, naming("from-cluster", "echo-cluster"))
        cluster.create(jobs, naming("from-team", "echo-team", "TrainingRuntime"))
        eventually(
            lambda: (
                {k: v for k, v in commands().items() if k.startswith("from-")}
                == {
                    "from-cluster-node-0": ["echo", "c"],
                    "from-cluster-node-1": ["echo", "c"],
                    "from-team-node-0": ["echo", "t"],
                    "from-team-node-1": ["echo", "t"],
                }
            ),
            what="both TrainJobs' pods, from the cluster's runtimes",
        )
        # A TrainJob naming a runtime nobody applied yet is refused at its field path ...
        cluster.create(jobs, naming("waiting", "echo-later"))

        def refused() -> bool:
            events = cluster.list(f"/api/v1/namespaces/{namespace}/events")
            return any(
                e["involvedObject"]["name"] == "waiting"
                and e["reason"] == "InvalidSpec"
                and "spec.runtimeRef.name" in e["message"]
                for e in events
            )

        eventually(refused, what="an InvalidSpec event naming spec.runtimeRef.name")
        assert not any(name.startswith("waiting-") for name in commands())
        # ... and runs once the runtime is applied: a runtime's change reconciles TrainJobs.
        cluster.create(f"{RUNTIMES}/clustertrainingruntimes", echo_runtime("echo-later", "l"))
        eventually(
            lambda: commands().get("waiting-node-0") == ["echo", "l"],
            what="the waiting TrainJob's pods once its runtime exists",
        )
        # A deleted runtime is forgotten: a new TrainJob naming it is refused.
        cluster.delete(f"{RUNTIMES}/namespaces/{namespace}/trainingruntimes/echo-team")
        cluster.create(jobs, naming("too-late", "echo-team", "TrainingRuntime"))

        def refused_late() -> bool:
            events = cluster.list(f"/api/v1/namespaces/{namespace}/events")
            return any(
                e["involvedObject"]["name"] == "too-late" and e["reason"] == "InvalidSpec"
                for e in events
            )

        eventually(refused_late, what="the TrainJob naming a deleted runtime refused")
        assert not any(name.startswith("too-late-") for name in commands())
