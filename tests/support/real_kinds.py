"""The real control plane's jobs, kind by kind: how a test makes one (by the SDK or by
``kubectl apply`` in kubemill's group or the kind's upstream one), reads it and its pods, and
tells what it waits for. Shared by the table of every kind (``cluster/test_kinds_real.py``)
and the kinds with tests of their own (``cluster/test_ray_real.py``)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from kubemill.sdk import JobClient
from kubemill.substrates.kubernetes.restarts import RESTARTS_ANNOTATION
from support.control_plane import ControlPlane
from support.node import NodeStandIn

WAIT = 60.0
"""Upper bound on the operator and the controllers acting: a hang guard."""

Manifest = dict[str, Any]


@dataclass(frozen=True)
class Kind:
    """One row of the table: how to make the kind's manifest, where it lives, how many
    pods it runs, and which pods' exits end it (in order)."""

    id: str
    manifest: Callable[[str], Manifest]
    plural: str
    upstream: str | None
    """The apiVersion of the kind's upstream group (None: kubemill.dev only)."""
    pods: int
    ends: tuple[str, ...]
    """Name fragments of the pods that exit 0, in this order, to end the job."""
    restarted: str | None = None
    """The replica type restarted in place (and its pods' name fragment, lowercased)."""
    exit_code_policy: bool = True
    """Whether its replicas take ``restartPolicy: ExitCode`` (MPIJob's do not, as in
    mpi-operator: see :func:`test_an_mpijob_under_exit_code_is_told_invalid_by_an_event`)."""


HOW = ["sdk", "kubectl", "kubectl-upstream"]
"""How a job is created: the SDK, kubectl in kubemill.dev/v1, kubectl in its upstream group."""


def namespace_pods(plane: ControlPlane, namespace: str) -> dict[str, dict[str, Any]]:
    listing = plane.request("GET", f"/api/v1/namespaces/{namespace}/pods")["items"]
    return {p["metadata"]["name"]: p for p in listing}


def running(plane: ControlPlane, node: NodeStandIn, namespace: str, count: int) -> bool:
    current = namespace_pods(plane, namespace)
    live = [n for n, p in current.items() if "deletionTimestamp" not in p["metadata"]]
    return len(live) == count and all(node.running(namespace, n) for n in live)


def true(obj: dict[str, Any], condition: str) -> bool:
    return any(
        c["type"] == condition and c["status"] == "True"
        for c in obj.get("status", {}).get("conditions", [])
    )


def through_status_subresource(obj: dict[str, Any], field: str) -> bool:
    """Whether ``status.<field>`` was last written through ``/status`` (server-side field
    ownership: an entry of ``managedFields`` with ``subresource: status`` owns it)."""
    return any(
        f"f:{field}" in entry.get("fieldsV1", {}).get("f:status", {})
        for entry in obj["metadata"].get("managedFields", [])
        if entry.get("subresource") == "status"
    )


@dataclass
class Job:
    """A created job: its API path, for the tests to read it."""

    plane: ControlPlane
    namespace: str
    api_version: str
    plural: str
    name: str

    @property
    def path(self) -> str:
        return f"/apis/{self.api_version}/namespaces/{self.namespace}/{self.plural}/{self.name}"

    def get(self) -> dict[str, Any]:
        return self.plane.request("GET", self.path)  # type: ignore[no-any-return]

    def restarts(self, replica: str) -> int:
        """The replica type's restart count: in the status, or kubemill's annotation where
        the group's schema has no such field (the real server prunes it)."""
        obj = self.get()
        counted = obj.get("status", {}).get("replicaStatuses", {}).get(replica, {})
        if "restarts" in counted:
            return int(counted["restarts"])
        kept = obj["metadata"].get("annotations", {}).get(RESTARTS_ANNOTATION, "{}")
        return int(json.loads(kept).get(replica, {}).get("restarts", 0))


@dataclass
class Seen:
    """What a test waits for, told with the job's pods and status when the wait fails."""

    what: str
    job: Job

    def __str__(self) -> str:
        pods = {
            name: pod["status"].get("phase")
            for name, pod in namespace_pods(self.job.plane, self.job.namespace).items()
        }
        status = self.job.plane.get_or_none(self.job.path) or {}
        return f"{self.what} (pods {pods}; status {json.dumps(status.get('status'))})"


def create(plane: ControlPlane, namespace: str, kind: Kind, how: str, manifest: Manifest) -> Job:
    if how == "sdk":
        client = JobClient("kubernetes", kubeconfig=str(plane.admin_kubeconfig))
        client.submit(manifest, namespace=namespace)
        return Job(plane, namespace, "kubemill.dev/v1", kind.plural, manifest["metadata"]["name"])
    manifest = copy.deepcopy(manifest)
    if how == "kubectl-upstream":
        assert kind.upstream
        manifest["apiVersion"] = kind.upstream
    applied = plane.kubectl(
        "apply",
        "--server-side",
        "--validate=strict",
        "--field-manager=test",
        "-n",
        namespace,
        "-f",
        "-",
        stdin=yaml.safe_dump(manifest),
    )
    assert "serverside-applied" in applied.stdout, applied.stdout
    return Job(plane, namespace, manifest["apiVersion"], kind.plural, manifest["metadata"]["name"])


OWNED = [
    "/api/v1/namespaces/{ns}/pods",
    "/api/v1/namespaces/{ns}/services",
    "/api/v1/namespaces/{ns}/configmaps",
    "/api/v1/namespaces/{ns}/secrets",
    "/api/v1/namespaces/{ns}/serviceaccounts",
    "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
    "/apis/apps/v1/namespaces/{ns}/deployments",
    "/apis/batch/v1/namespaces/{ns}/jobs",
    "/apis/kubemill.dev/v1/namespaces/{ns}/sparkapplications",
]
"""Where a job's children live (each kind makes some of these)."""


def owned_by(plane: ControlPlane, namespace: str, uid: str) -> list[str]:
    """Every object of ``namespace`` with an ownerReference to ``uid``."""
    found = []
    for path in OWNED:
        for item in plane.request("GET", path.format(ns=namespace))["items"]:
            owners = item["metadata"].get("ownerReferences", [])
            if any(o["uid"] == uid for o in owners):
                found.append(f"{path.rsplit('/', 1)[1]}/{item['metadata']['name']}")
    return found
