"""Training runtimes and the TrainJobs naming them, as the operator tests apply them (the
test API server's and the real control plane's)."""

from __future__ import annotations

from typing import Any


def node_runtime(
    name: str,
    container: dict[str, Any],
    *,
    kind: str = "ClusterTrainingRuntime",
    namespace: str = "",
) -> dict[str, Any]:
    """A runtime without an ML policy whose trainer step runs ``container`` on 2 nodes
    (a TrainingRuntime lives in ``namespace``)."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": kind,
        "metadata": {"name": name, **({"namespace": namespace} if namespace else {})},
        "spec": {
            "mlPolicy": {"numNodes": 2},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {
                                    "labels": {
                                        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"
                                    }
                                },
                                "spec": {"template": {"spec": {"containers": [container]}}},
                            },
                        }
                    ]
                }
            },
        },
    }


def echo_runtime(name: str, word: str, *, namespace: str = "") -> dict[str, Any]:
    """A runtime whose 2 nodes run ``echo word`` (a TrainingRuntime when in a namespace)."""
    container = {"name": "node", "image": "busybox", "command": ["echo", word]}
    kind = "TrainingRuntime" if namespace else "ClusterTrainingRuntime"
    return node_runtime(name, container, kind=kind, namespace=namespace)


def naming(name: str, runtime: str, kind: str = "ClusterTrainingRuntime") -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": runtime, "kind": kind}},
    }
