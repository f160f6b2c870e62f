"""Job manifests used across the Kubernetes manifest tests (plain dicts, as users write them)."""

from __future__ import annotations

import copy
from typing import Any


def tfjob(name: str = "mnist", namespace: str = "team-a") -> dict[str, Any]:
    """A TFJob with Chief, PS and 2 Workers, template labels/annotations and resources."""
    container = {
        "name": "tensorflow",
        "image": "python:3.11",
        "command": ["python", "train.py"],
        "args": ["--ps_hosts=$(TF_PS_HOSTS)"],
        "env": [
            {"name": "DATA", "value": "/data"},
            {"name": "MY_POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": 1}},
    }
    template = {
        "metadata": {"labels": {"team": "vision"}, "annotations": {"note": "keep me"}},
        "spec": {"containers": [container]},
    }
    return {
        "apiVersion": "kubemill.dev/v1",
        "kind": "TFJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 3},
            "tfReplicaSpecs": {
                "Chief": {"replicas": 1, "template": copy.deepcopy(template)},
                "PS": {"replicas": 1, "template": copy.deepcopy(template)},
                "Worker": {
                    "replicas": 2,
                    "restartPolicy": "ExitCode",
                    "template": copy.deepcopy(template),
                },
            },
        },
    }


def pytorchjob(name: str = "ddp", namespace: str = "default") -> dict[str, Any]:
    """A PyTorchJob with a Master and 2 Workers (OnFailure by default)."""

    def template() -> dict[str, Any]:
        return {
            "spec": {
                "containers": [
                    {
                        "name": "pytorch",
                        "image": "pytorch/pytorch:2",
                        "command": ["python", "-m", "train"],
                        "ports": [{"name": "pytorchjob-port", "containerPort": 23456}],
                    },
                    {"name": "sidecar", "image": "busybox", "command": ["sleep", "inf"]},
                ]
            }
        }

    return {
        "apiVersion": "kubemill.dev/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nprocPerNode": 2,
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": template()},
                "Worker": {"replicas": 2, "template": template()},
            },
        },
    }


def elastic_pytorchjob() -> dict[str, Any]:
    """Elastic workers only, with gang scheduling settings."""
    job = pytorchjob("elastic")
    del job["spec"]["pytorchReplicaSpecs"]["Master"]
    job["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 3, "rdzvBackend": "c10d"}
    job["spec"]["runPolicy"] = {
        "schedulingPolicy": {
            "minAvailable": 1,
            "queue": "research",
            "priorityClass": "high",
            "minResources": {"cpu": 4, "memory": "8Gi"},
            "scheduleTimeoutSeconds": 120,
        }
    }
    return job
