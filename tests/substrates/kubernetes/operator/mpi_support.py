"""What the MPI operator tests share: a program of ranks and an RBAC rule check."""

from __future__ import annotations

from typing import Any

from support.kmock_cluster import Call

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


def role_allows(rules: list[dict[str, Any]], call: Call) -> bool:
    """RBAC's rule match: API group, resource (``pods/exec``), every verb the server checks
    (:attr:`Call.verbs_checked`) and resource names."""
    return any(
        (call.group or "") in rule["apiGroups"]
        and call.resource in rule["resources"]
        and all(verb in rule["verbs"] for verb in call.verbs_checked)
        and (not rule.get("resourceNames") or call.name in rule["resourceNames"])
        for rule in rules
    )
