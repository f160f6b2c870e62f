"""RayCluster and RayJob through the real control plane (the Ray rows of test_kinds_real).

Each created three ways, as every kind there: by the SDK (``kubemill.dev/v1``), by ``kubectl
apply --server-side --validate=strict`` in ``kubemill.dev/v1`` and in KubeRay's ``ray.io/v1``
(served by ``--serve-upstream-groups``). The real API server accepts the object and every
child the operator creates (its ServiceAccount refused nothing), the real kube-scheduler binds
the pods, the node stand-in plays them, and the status goes through the status subresource.
Then suspend removes the pods and resume brings them back, and deleting the object lets the
real garbage collector take every child.

The node stand-in does not run Ray, so a RayJob's outcome (Ray's job API, which the operator
does not read yet) is not judged here: only what the real server must accept on the way to it.
tests/engines/ray/test_rayjob_local.py judges real Ray jobs.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster.test_kinds_real import (
    HOW,
    WAIT,
    Job,
    Kind,
    Seen,
    create,
    namespace_pods,
    owned_by,
    running,
    through_status_subresource,
    true,
)
from kubemill.sdk import JobClient
from support.control_plane import ControlPlane
from support.node import NodeStandIn
from support.real_operator import RealOperator
from support.waiting import eventually

pytestmark = pytest.mark.usefixtures("operator")

EXAMPLES = Path(__file__).parents[2] / "examples" / "ray"


def example(file: str, name: str) -> dict[str, Any]:
    """The example manifest in kubemill's group, named ``name``."""
    manifest: dict[str, Any] = yaml.safe_load((EXAMPLES / file).read_text(encoding="utf-8"))
    manifest = copy.deepcopy(manifest)
    manifest["apiVersion"] = "kubemill.dev/v1"
    manifest["metadata"] = {"name": name}
    return manifest


RAY_CLUSTER = Kind(
    "RayCluster",
    lambda n: example("raycluster.yaml", n),
    "rayclusters",
    "ray.io/v1",
    3,
    (),
)
RAY_JOB = Kind(
    "RayJob",
    lambda n: example("rayjob-sum.yaml", n),
    "rayjobs",
    "ray.io/v1",
    4,
    (),
)
"""A head, two workers and the K8sJobMode submitter."""


def patch_suspend(client: JobClient, plane: ControlPlane, job: Job, value: bool) -> None:
    """Suspended or resumed as its creator would: the SDK, or a merge patch of ``spec.suspend``."""
    if job.api_version == "kubemill.dev/v1":
        (client.suspend if value else client.resume)(job.name)
        return
    plane.request(
        "PATCH",
        job.path,
        {"spec": {"suspend": value}},
        content_type="application/merge-patch+json",
    )


def suspend_resume_then_delete(
    plane: ControlPlane, node: NodeStandIn, job: Job, kind: Kind, suspended: str
) -> None:
    """Suspend: every pod goes, the object stays and its status says so (``suspended`` is
    ``field=value``); resume: new pods come back; delete: the garbage collector takes every
    child."""
    namespace = job.namespace
    client = JobClient("kubernetes", kubeconfig=str(plane.admin_kubeconfig), namespace=namespace)
    first = {p["metadata"]["uid"] for p in namespace_pods(plane, namespace).values()}
    patch_suspend(client, plane, job, True)
    eventually(lambda: not namespace_pods(plane, namespace), timeout=WAIT, what="the pods gone")
    field, value = suspended.split("=")
    eventually(
        lambda: job.get().get("status", {}).get(field) == value,
        timeout=WAIT,
        what=Seen(f"status.{field} {value}", job),
    )
    patch_suspend(client, plane, job, False)
    eventually(
        lambda: running(plane, node, namespace, kind.pods),
        timeout=WAIT,
        what=Seen("running again", job),
    )
    again = {p["metadata"]["uid"] for p in namespace_pods(plane, namespace).values()}
    assert not first & again
    uid = job.get()["metadata"]["uid"]
    children = owned_by(plane, namespace, uid)
    assert any(c.startswith("services/") for c in children), children
    plane.request("DELETE", job.path)
    eventually(
        lambda: not owned_by(plane, namespace, uid) and not namespace_pods(plane, namespace),
        timeout=WAIT,
        what=f"its children collected: {children}",
    )


@pytest.mark.parametrize("how", HOW)
def test_a_ray_cluster_is_provisioned_suspended_resumed_and_collected(
    control_plane: ControlPlane, node: NodeStandIn, operator: RealOperator, how: str
) -> None:
    namespace = control_plane.new_namespace()
    job = create(control_plane, namespace, RAY_CLUSTER, how, RAY_CLUSTER.manifest("rc"))
    eventually(
        lambda: running(control_plane, node, namespace, RAY_CLUSTER.pods),
        timeout=WAIT,
        what=Seen("the head and 2 workers running", job),
    )
    pods = namespace_pods(control_plane, namespace)
    assert set(pods) == {"rc-head-0", "rc-workers-0", "rc-workers-1"}
    # Bound by the real kube-scheduler (the node plays only pods bound to it).
    assert {p["spec"]["nodeName"] for p in pods.values()} == {control_plane.node}
    service = control_plane.request("GET", f"/api/v1/namespaces/{namespace}/services/rc-head-svc")
    assert {p["port"] for p in service["spec"]["ports"]} >= {6379, 8265, 10001}
    ready = eventually(
        lambda: (j := job.get()) and true(j, "RayClusterProvisioned") and j,
        timeout=WAIT,
        what=Seen("RayClusterProvisioned", job),
    )
    status = ready["status"]
    assert (status["state"], status["readyWorkerReplicas"], status["desiredWorkerReplicas"]) == (
        "ready",
        2,
        2,
    )
    assert true(ready, "HeadPodReady")
    assert status["endpoints"]["dashboard"] == "8265"
    assert through_status_subresource(ready, "conditions")
    assert not operator.failed_creates(namespace)
    suspend_resume_then_delete(control_plane, node, job, RAY_CLUSTER, "state=suspended")


@pytest.mark.parametrize("how", HOW)
def test_a_rayjob_brings_up_its_cluster_and_submitter_suspends_and_is_collected(
    control_plane: ControlPlane, node: NodeStandIn, operator: RealOperator, how: str
) -> None:
    namespace = control_plane.new_namespace()
    job = create(control_plane, namespace, RAY_JOB, how, RAY_JOB.manifest("rj"))
    # The head, then the workers once it is ready, then the submitter once every node is.
    eventually(
        lambda: running(control_plane, node, namespace, RAY_JOB.pods),
        timeout=WAIT,
        what=Seen("the head, 2 workers and the submitter running", job),
    )
    pods = namespace_pods(control_plane, namespace)
    assert set(pods) == {"rj-head-0", "rj-workers-0", "rj-workers-1", "rj-submitter-0"}
    assert {p["spec"]["nodeName"] for p in pods.values()} == {control_plane.node}
    submitter = pods["rj-submitter-0"]["spec"]["containers"][0]["command"]
    assert f"http://rj-head-svc.{namespace}.svc.cluster.local:8265" in submitter
    control_plane.request("GET", f"/api/v1/namespaces/{namespace}/services/rj-head-svc")
    # Nothing reads Ray's job API on Kubernetes yet: the deployment is as far as it goes.
    started = eventually(
        lambda: (j := job.get()) and j.get("status", {}).get("jobDeploymentStatus") and j,
        timeout=WAIT,
        what=Seen("a jobDeploymentStatus", job),
    )
    status = started["status"]
    assert status["rayClusterName"] == "rj"
    assert status["dashboardURL"] == f"rj-head-svc.{namespace}.svc.cluster.local:8265"
    assert through_status_subresource(started, "jobDeploymentStatus")
    assert not operator.failed_creates(namespace)
    suspend_resume_then_delete(control_plane, node, job, RAY_JOB, "jobDeploymentStatus=Suspended")
