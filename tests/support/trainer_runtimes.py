"""Training runtimes and the TrainJobs naming them, as the operator tests apply them (the
test API server's and the real control plane's)."""

from __future__ import annotations

from typing import Any


def echo_runtime(name: str, word: str, *, namespace: str = "") -> dict[str, Any]:
    """A runtime without an ML policy whose 2 nodes run ``echo word``."""
    container = {"name": "node", "image": "busybox", "command": ["echo", word]}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime" if namespace else "ClusterTrainingRuntime",
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


def naming(name: str, runtime: str, kind: str = "ClusterTrainingRuntime") -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": runtime, "kind": kind}},
    }
