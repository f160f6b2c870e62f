"""The client against the real kubemill operator (a subprocess) on the kmock cluster.

The other client tests play the operator themselves; this one checks the contract between
the two for real: the labels, ownerReferences and conditions the operator writes are what
the client reads, the operator's Events are found, a foreground submit returns once the
operator has acted, and deleting the job takes its pods along. The test plays only the
kubelet (pod phases and log lines).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kubemill.api import STOP_ANNOTATION, ConditionType
from kubemill.kinds import load_one
from kubemill.substrates.base import SubmitOptions
from kubemill.substrates.kubernetes.client import KubernetesBackend
from support.kube_client_support import ClientClusterThread, LogBook, kmock_cluster
from support.operator_support import (
    KUBELET_FINISHES_AFTER,
    Cluster,
    Kubelet,
    running_operator,
)
from support.waiting import eventually

JOB = """
apiVersion: kubemill.dev/v1
kind: PyTorchJob
metadata: {name: ddp}
spec:
  runPolicy: {cleanPodPolicy: None}
  pytorchReplicaSpecs:
    Master:
      template:
        spec:
          containers: [{name: pytorch, image: trainer:1, command: [python, ddp.py]}]
    Worker:
      replicas: 1
      template:
        spec:
          containers: [{name: pytorch, image: trainer:1, command: [python, ddp.py]}]
"""


class OperatedCluster(ClientClusterThread, Cluster):
    """The client tests' cluster (pod logs) with the operator tests' CRD install and kubelet."""

    def __init__(self) -> None:
        super().__init__()
        # ClientClusterThread serves a cluster of its own, made after Cluster set up its
        # kubelet: deleted pods end their Terminating window the same way here.
        self.cluster.kubelet_finishes_after = KUBELET_FINISHES_AFTER


@pytest.fixture
def operated(tmp_path: Path) -> Iterator[tuple[OperatedCluster, KubernetesBackend]]:
    with OperatedCluster() as cluster:
        cluster.install()
        with running_operator(cluster, tmp_path, "--all-namespaces"):
            config = kmock_cluster.write_kubeconfig(tmp_path / "user.kubeconfig", cluster.url)
            backend = KubernetesBackend(kubeconfig=config, poll_interval=0.05)
            # The operator fixture checks every call not made by the tests against the
            # operator's RBAC; the user's calls are the test's here.
            backend.connection.api_client.user_agent = kmock_cluster.TEST_USER_AGENT + "-sdk"
            yield cluster, backend
            backend.close()


def test_client_and_operator_agree(operated: tuple[OperatedCluster, KubernetesBackend]) -> None:
    cluster, backend = operated
    namespace = cluster.namespace()
    kubelet = Kubelet(cluster, namespace)

    view = backend.submit(load_one(JOB), SubmitOptions(detach=False, namespace=namespace))
    assert view.status.conditions, "a foreground submit returns once the operator has acted"

    created = eventually(
        lambda: all(r.reason != "NoPod" for r in backend.get("ddp", namespace).replicas),
        what="the operator's pods, as the client sees them",
    )
    assert created
    kubelet.set("ddp-master-0", "Running", container="pytorch")
    kubelet.set("ddp-worker-0", "Running", container="pytorch")
    eventually(lambda: backend.get("ddp", namespace).phase == "Running", what="Running")
    book = cluster.cluster.logs[namespace, "ddp-master-0"] = LogBook("pytorch")
    book.write("loss 0.1")
    assert [(x.replica, x.text) for x in backend.logs("ddp", namespace)] == [
        ("ddp-master-0", "loss 0.1")
    ]

    kubelet.set("ddp-master-0", "Succeeded", container="pytorch", exit_code=0)
    kubelet.set("ddp-worker-0", "Succeeded", container="pytorch", exit_code=0)
    done = backend.wait("ddp", namespace, timeout=30)
    assert done.phase == "Succeeded"
    assert [(r.name, r.phase, r.exit_code) for r in done.replicas] == [
        ("ddp-master-0", "Succeeded", 0),
        ("ddp-worker-0", "Succeeded", 0),
    ]
    events = backend.events("ddp", namespace)
    assert events, "the operator's Events on the job are found"
    assert [e.time for e in events] == sorted(e.time for e in events)

    backend.delete("ddp", namespace)
    eventually(
        lambda: cluster.list(f"/api/v1/namespaces/{namespace}/pods") == [],
        what="the pods garbage-collected with their job",
    )
    assert backend.list(namespace) == []


def test_suspend_resume_and_interrupt_are_carried_out_by_the_operator(
    operated: tuple[OperatedCluster, KubernetesBackend],
) -> None:
    cluster, backend = operated
    namespace = cluster.namespace()
    kubelet = Kubelet(cluster, namespace)
    pods = f"/api/v1/namespaces/{namespace}/pods"

    def pod_names() -> set[str]:
        return {p["metadata"]["name"] for p in cluster.list(pods)}

    backend.submit(load_one(JOB), SubmitOptions(detach=False, namespace=namespace))
    eventually(lambda: pod_names() == {"ddp-master-0", "ddp-worker-0"}, what="pods")
    kubelet.set("ddp-master-0", "Running", container="pytorch")
    kubelet.set("ddp-worker-0", "Running", container="pytorch")
    eventually(lambda: backend.get("ddp", namespace).phase == "Running", what="Running")

    backend.suspend("ddp", namespace)
    eventually(lambda: backend.get("ddp", namespace).phase == "Suspended", what="Suspended")
    eventually(lambda: pod_names() == set(), what="the pods of a suspended job deleted")

    backend.resume("ddp", namespace)
    eventually(lambda: pod_names() == {"ddp-master-0", "ddp-worker-0"}, what="pods again")
    kubelet.set("ddp-master-0", "Running", container="pytorch")
    kubelet.set("ddp-worker-0", "Running", container="pytorch")
    eventually(lambda: backend.get("ddp", namespace).phase == "Running", what="Running again")

    view = backend.interrupt("ddp", namespace, why="the test is done")
    failed = eventually(
        lambda: backend.get("ddp", namespace).status.condition(ConditionType.FAILED),
        what="the operator's verdict",
    )
    assert failed.reason == "Interrupted" and "the test is done" in failed.message
    assert view.job.metadata.annotations[STOP_ANNOTATION] == "the test is done"
    eventually(lambda: pod_names() == set(), what="the stopped pods deleted")
