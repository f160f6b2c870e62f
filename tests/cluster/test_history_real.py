"""History on the real control plane: a job deleted by its TTL leaves the operator's record,
written as its own ServiceAccount (a Role in its namespace only), read back by the SDK and
listed by `kubemill get --history`."""

from __future__ import annotations

import pytest

from kubemill.sdk import JobClient
from support.control_plane import ControlPlane, absent
from support.node import NodeStandIn
from support.operator_jobs import pytorchjob
from support.real_operator import run_kubemill
from support.waiting import eventually

pytestmark = pytest.mark.usefixtures("operator")

WAIT = 60.0
"""Upper bound on the operator and the controllers acting: a hang guard."""


def test_a_job_deleted_by_its_ttl_leaves_a_record_with_its_replicas_exit_codes(
    control_plane: ControlPlane, node: NodeStandIn
) -> None:
    namespace = control_plane.new_namespace()
    client = JobClient(
        "kubernetes", kubeconfig=str(control_plane.admin_kubeconfig), namespace=namespace
    )
    client.submit(
        pytorchjob("kept", run_policy={"ttlSecondsAfterFinished": 1, "cleanPodPolicy": "None"})
    )
    names = ("kept-master-0", "kept-worker-0")
    eventually(
        lambda: all(node.running(namespace, name) for name in names),
        timeout=WAIT,
        what="running",
    )
    node.finish(namespace, "kept-worker-0", 0)
    node.finish(namespace, "kept-master-0", 0)
    eventually(
        lambda: absent(
            control_plane, f"/apis/kubemill.dev/v1/namespaces/{namespace}/pytorchjobs/kept"
        ),
        timeout=WAIT,
        what="the job deleted by its TTL",
    )

    [record] = eventually(lambda: client.history(), timeout=WAIT, what="the job's record")
    assert (record.name, record.kind, record.deleted_by) == ("kept", "PyTorchJob", "TTLExpired")
    assert record.view.phase == "Succeeded"
    assert sorted((r.name, r.phase, r.exit_code) for r in record.view.replicas) == [
        ("kept-master-0", "Succeeded", 0),
        ("kept-worker-0", "Succeeded", 0),
    ]
    assert "PyTorchJobSucceeded" in [e.reason for e in record.events]

    listed = run_kubemill(
        control_plane, "--substrate", "kubernetes", "get", "-n", namespace, "--history"
    )
    assert listed.returncode == 0, listed.stdout + listed.stderr
    [_, row] = listed.stdout.splitlines()
    assert row.split()[:2] == ["kept", "PyTorchJob"] and "(deleted)" in row
