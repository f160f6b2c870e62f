"""Training runtimes on the real control plane: the operator (installed with ``--runtimes``)
lists and watches the cluster's ClusterTrainingRuntimes and TrainingRuntimes with its own
read-only grant, so a TrainJob applied with kubectl in Kubeflow Trainer's group runs the
nodes of the runtime it names, applied after the operator started, and ends Complete."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from support.control_plane import ControlPlane
from support.node import NodeStandIn
from support.trainer_runtimes import echo_runtime, naming
from support.waiting import eventually

pytestmark = pytest.mark.usefixtures("operator")

WAIT = 60.0
"""Upper bound on the operator and the controllers acting: a hang guard."""
TRAINER = "/apis/trainer.kubeflow.org/v1alpha1"


def apply(plane: ControlPlane, namespace: str, manifest: dict[str, Any]) -> None:
    plane.kubectl(
        "apply", "--server-side", "--validate=strict", "-n", namespace, "-f", "-",
        stdin=yaml.safe_dump(manifest),
    )  # fmt: skip


def test_trainjobs_run_the_nodes_of_the_cluster_runtimes_they_name(
    control_plane: ControlPlane, node: NodeStandIn
) -> None:
    namespace = control_plane.new_namespace("trainer")
    apply(control_plane, namespace, echo_runtime("echo-real-cluster", "c"))
    apply(control_plane, namespace, echo_runtime("echo-real-team", "t", namespace=namespace))
    apply(control_plane, namespace, naming("from-cluster", "echo-real-cluster"))
    apply(control_plane, namespace, naming("from-team", "echo-real-team", "TrainingRuntime"))

    def commands() -> dict[str, list[str]]:
        pods = control_plane.request("GET", f"/api/v1/namespaces/{namespace}/pods")["items"]
        return {p["metadata"]["name"]: p["spec"]["containers"][0]["command"] for p in pods}

    expected = {
        "from-cluster-node-0": ["echo", "c"],
        "from-cluster-node-1": ["echo", "c"],
        "from-team-node-0": ["echo", "t"],
        "from-team-node-1": ["echo", "t"],
    }
    eventually(lambda: commands() == expected, timeout=WAIT, what="the runtimes' nodes")
    for name in expected:
        eventually(lambda name=name: node.running(namespace, name), timeout=WAIT, what=name)
        node.finish(namespace, name, 0)

    def complete(job: str) -> bool:
        obj = control_plane.request("GET", f"{TRAINER}/namespaces/{namespace}/trainjobs/{job}")
        conditions = obj.get("status", {}).get("conditions", [])
        return any(c["type"] == "Complete" and c["status"] == "True" for c in conditions)

    eventually(lambda: complete("from-cluster") and complete("from-team"), timeout=WAIT)
    control_plane.request("DELETE", f"{TRAINER}/clustertrainingruntimes/echo-real-cluster")
