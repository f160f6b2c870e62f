"""The ClusterTrainingRuntimes Kubeflow Trainer ships for CPU-capable frameworks, as data.

Each is the manifest upstream installs (``kubeflow/trainer/manifests/base/runtimes/``:
``torch_distributed.yaml``, ``jax_distributed.yaml``, ``xgboost_distributed.yaml``, and for
``mpi-distributed`` the older ``mpi_distributed.yaml`` of its pretraining runtimes), values
unchanged, so that a
TrainJob naming one runs without a cluster (:mod:`.runtimes`). The torch runtime's default
command only prints its environment, as upstream's does: a TrainJob brings its own.
"""

from __future__ import annotations

from typing import Any

from kubemill.engines.trainer.api.runtime import API_VERSION, CLUSTER_TRAINING_RUNTIME

ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
"""The label on a replicated job's template naming the TrainJob step it runs."""
FRAMEWORK_LABEL = "trainer.kubeflow.org/framework"


def _node(image: str, **container: Any) -> dict[str, Any]:
    """The ``node`` replicated job every default runtime has: the trainer step."""
    return {
        "name": "node",
        "template": {
            "metadata": {"labels": {ANCESTOR_LABEL: "trainer"}},
            "spec": {
                "template": {
                    "spec": {"containers": [{"name": "node", "image": image, **container}]}
                }
            },
        },
    }


def _runtime(name: str, labels: dict[str, str], spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": CLUSTER_TRAINING_RUNTIME,
        "metadata": {"name": name, **({"labels": labels} if labels else {})},
        "spec": spec,
    }


_TORCH_COMMAND = (
    'echo "Torch Distributed Runtime"\n\n'
    'echo "--------------------------------------"\n'
    'echo "Torch Default Runtime Env"\n'
    "env | grep PET_\n\n"
    "pip list\n"
)

_MPI_CONTAINER_SECURITY = {"runAsUser": 1000}

DEFAULT_RUNTIMES: tuple[dict[str, Any], ...] = (
    _runtime(
        "torch-distributed",
        {},
        {
            "mlPolicy": {"numNodes": 1, "torch": {"numProcPerNode": "auto"}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        _node(
                            "pytorch/pytorch:2.7.1-cuda12.6-cudnn9-runtime",
                            command=["/bin/bash", "-c", _TORCH_COMMAND],
                        )
                    ]
                }
            },
        },
    ),
    _runtime(
        "mpi-distributed",
        {"trainer.kubeflow.org/phase": "pre-training"},
        {
            "mlPolicy": {
                "numNodes": 2,
                "mpi": {
                    "numProcPerNode": 1,
                    "mpiImplementation": "OpenMPI",
                    "sshAuthMountPath": "/home/mpiuser/.ssh",
                },
            },
            "template": {
                "spec": {
                    "successPolicy": {"operator": "All", "targetReplicatedJobs": ["launcher"]},
                    "replicatedJobs": [
                        {
                            "name": "launcher",
                            "template": {
                                "spec": {
                                    "template": {
                                        "spec": {
                                            "containers": [
                                                {
                                                    "name": "launcher",
                                                    "image": "mpioperator/mpi-pi:openmpi",
                                                    "securityContext": _MPI_CONTAINER_SECURITY,
                                                    "command": ["mpirun"],
                                                    "args": ["/home/mpiuser/pi"],
                                                }
                                            ]
                                        }
                                    }
                                }
                            },
                        },
                        {
                            "name": "trainer-node",
                            "template": {
                                "spec": {
                                    "template": {
                                        "spec": {
                                            "containers": [
                                                {
                                                    "name": "trainer-node",
                                                    "image": "mpioperator/mpi-pi:openmpi",
                                                    "securityContext": _MPI_CONTAINER_SECURITY,
                                                    "command": ["/usr/sbin/sshd"],
                                                    "args": [
                                                        "-De",
                                                        "-f",
                                                        "/home/mpiuser/.sshd_config",
                                                    ],
                                                }
                                            ]
                                        }
                                    }
                                }
                            },
                        },
                    ],
                }
            },
        },
    ),
    _runtime(
        "jax-distributed",
        {FRAMEWORK_LABEL: "jax", "trainer.kubeflow.org/webhook-validation": "disabled"},
        {
            "mlPolicy": {"numNodes": 1, "jax": {}},
            "template": {"spec": {"replicatedJobs": [_node("nvcr.io/nvidia/jax:25.10-py3")]}},
        },
    ),
    _runtime(
        "xgboost-distributed",
        {FRAMEWORK_LABEL: "xgboost"},
        {
            "mlPolicy": {"numNodes": 1, "xgboost": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [_node("ghcr.io/kubeflow/trainer/xgboost-runtime:v2.2.5")]
                }
            },
        },
    ),
)
"""The default runtimes' manifests, in the order upstream lists them."""

__all__ = ["ANCESTOR_LABEL", "DEFAULT_RUNTIMES", "FRAMEWORK_LABEL"]
