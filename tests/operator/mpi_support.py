"""What the MPI operator tests share: a job, a program of ranks, an RBAC rule check."""

from __future__ import annotations

import copy
from typing import Any

from kmock_cluster import Call

ALLREDUCE = """\
import json, os
from mpi4py import MPI

world = MPI.COMM_WORLD
total = world.allreduce(world.rank + 1)
report = {
    "rank": world.rank, "size": world.size, "sum": total, "pod": os.environ.get("HOSTNAME"),
    "tag": os.environ.get("WORKER_TAG"), "tmpdir": os.environ.get("TMPDIR"),
}
os.write(1, (json.dumps(report) + "\\n").encode())  # one write: lines of ranks never mix
"""


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


def role_allows(rules: list[dict[str, Any]], call: Call) -> bool:
    """RBAC's rule match: API group, resource (``pods/exec``), verb and resource names."""
    return any(
        (call.group or "") in rule["apiGroups"]
        and call.resource in rule["resources"]
        and call.verb in rule["verbs"]
        and (not rule.get("resourceNames") or call.name in rule["resourceNames"])
        for rule in rules
    )
