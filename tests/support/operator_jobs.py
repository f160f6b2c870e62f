"""Job manifests for the operator tests (plain dicts, as a user would submit them)."""

from __future__ import annotations

import copy
from typing import Any

from kubemill.kinds import entry_for


def _replica(replicas: int, policy: str | None, container: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "replicas": replicas,
        "template": {
            "metadata": {"labels": {"team": "ml"}, "annotations": {"note": "kept"}},
            "spec": {
                "containers": [
                    {"name": container, "image": "example:latest", "command": ["python", "t.py"]}
                ]
            },
        },
    }
    if policy:
        spec["restartPolicy"] = policy
    return spec


def tfjob(
    name: str,
    *,
    chief: int = 1,
    ps: int = 0,
    workers: int = 2,
    policy: str | None = "OnFailure",
    run_policy: dict[str, Any] | None = None,
    api_version: str = "kubemill.dev/v1",
) -> dict[str, Any]:
    specs = {}
    if chief:
        specs["Chief"] = _replica(chief, policy, "tensorflow")
    if ps:
        specs["PS"] = _replica(ps, policy, "tensorflow")
    if workers:
        specs["Worker"] = _replica(workers, policy, "tensorflow")
    spec: dict[str, Any] = {"tfReplicaSpecs": specs}
    if run_policy:
        spec["runPolicy"] = run_policy
    return {"apiVersion": api_version, "kind": "TFJob", "metadata": {"name": name}, "spec": spec}


def pytorchjob(
    name: str,
    *,
    workers: int = 1,
    policy: str | None = "OnFailure",
    run_policy: dict[str, Any] | None = None,
    api_version: str = "kubemill.dev/v1",
) -> dict[str, Any]:
    specs = {"Master": _replica(1, policy, "pytorch")}
    if workers:
        specs["Worker"] = _replica(workers, policy, "pytorch")
    spec: dict[str, Any] = {"pytorchReplicaSpecs": specs}
    if run_policy:
        spec["runPolicy"] = run_policy
    return {
        "apiVersion": api_version,
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": spec,
    }


MPIJOB: dict[str, Any] = {
    "apiVersion": "kubemill.dev/v1",
    "kind": "MPIJob",
    "metadata": {"name": "m"},
    "spec": {
        "slotsPerWorker": 2,
        "mpiReplicaSpecs": {
            "Launcher": {
                "replicas": 1,
                "template": {
                    "spec": {
                        "containers": [
                            {"name": "launcher", "image": "mpi:1", "command": ["mpirun", "a.out"]}
                        ]
                    }
                },
            },
            "Worker": {
                "replicas": 2,
                "template": {"spec": {"containers": [{"name": "worker", "image": "mpi:1"}]}},
            },
        },
    },
}


def mpijob(*, launcher: list[str] | None = None, **spec: Any) -> dict[str, Any]:
    """MPIJob ``m``: a launcher (``launcher`` as its command) and 2 workers of 2 slots."""
    job = copy.deepcopy(MPIJOB)
    job["spec"].update(spec)
    if launcher is not None:
        replica = job["spec"]["mpiReplicaSpecs"]["Launcher"]
        replica["template"]["spec"]["containers"][0]["command"] = launcher
    return job


def replica_job(
    kind: str,
    name: str,
    replicas: dict[str, int],
    *,
    run_policy: dict[str, Any] | None = None,
    api_version: str = "kubemill.dev/v1",
) -> tuple[dict[str, Any], str]:
    """A job of a kind whose replica map is its only required field (JAXJob, XGBoostJob,
    PaddleJob), every replica OnFailure, and the name of the container it runs in."""
    model = entry_for(kind).api.model
    container = model.DEFAULT_CONTAINER
    pod = {"spec": {"containers": [{"name": container, "image": "example:latest"}]}}
    specs = {
        rtype: {"replicas": count, "restartPolicy": "OnFailure", "template": pod}
        for rtype, count in replicas.items()
    }
    spec: dict[str, Any] = {model.REPLICA_SPECS_FIELD: specs}
    if run_policy:
        spec["runPolicy"] = run_policy
    manifest = {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, "spec": spec}
    return manifest, container
