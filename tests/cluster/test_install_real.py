"""`kubemill install` and `uninstall` against the real API server and controllers.

This module has a control plane of its own: `uninstall --crds` takes every kubemill kind away,
which the session's other tests need.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kubemill.kinds import crds
from kubemill.substrates.kubernetes.install import DEFAULT_NAMESPACE, NAME
from support.control_plane import ControlPlane, absent, running_control_plane
from support.node import NodeStandIn, node_stand_in
from support.real_operator import run_kubemill
from support.waiting import eventually

OPERATOR_IMAGE = "kubemill-operator:test"


@pytest.fixture(scope="module")
def own_plane(
    control_plane_bin: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    with running_control_plane(tmp_path_factory.mktemp("kube-install"), control_plane_bin) as plane:
        yield plane
    assert not plane.alive()


@pytest.fixture(scope="module")
def own_node(own_plane: ControlPlane) -> Iterator[NodeStandIn]:
    with node_stand_in(own_plane) as stand_in:
        yield stand_in


def installed_objects(plane: ControlPlane) -> dict[str, str]:
    """Each object `kubemill install` writes, by API path, with its resourceVersion."""
    paths = [
        f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{c['metadata']['name']}"
        for c in crds()
    ]
    paths += [
        f"/api/v1/namespaces/{DEFAULT_NAMESPACE}",
        f"/api/v1/namespaces/{DEFAULT_NAMESPACE}/serviceaccounts/{NAME}",
        f"/apis/apps/v1/namespaces/{DEFAULT_NAMESPACE}/deployments/{NAME}",
        f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{NAME}",
        f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{NAME}",
    ]
    return {path: plane.request("GET", path)["metadata"]["resourceVersion"] for path in paths}


def test_install_is_applied_server_side_and_the_real_controllers_run_the_operator(
    own_plane: ControlPlane, own_node: NodeStandIn
) -> None:
    first = run_kubemill(own_plane, "install", "--image", OPERATOR_IMAGE, "--timeout", "120")
    assert first.returncode == 0, first.stdout + first.stderr
    for crd in crds():
        name = crd["metadata"]["name"]
        served = own_plane.request(
            "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
        )
        conditions = {c["type"]: c["status"] for c in served["status"]["conditions"]}
        # The real apiextensions controller: structural, names accepted, resources served.
        assert conditions.get("Established") == "True", (name, conditions)
        assert conditions.get("NamesAccepted") == "True", (name, conditions)
        assert conditions.get("NonStructuralSchema", "False") == "False", (name, conditions)
        managers = {m["manager"] for m in served["metadata"]["managedFields"]}
        assert "kubemill" in managers, managers
    deployment = own_plane.request(
        "GET", f"/apis/apps/v1/namespaces/{DEFAULT_NAMESPACE}/deployments/{NAME}"
    )
    assert deployment["status"].get("availableReplicas") == deployment["spec"]["replicas"]
    pods = own_plane.request("GET", f"/api/v1/namespaces/{DEFAULT_NAMESPACE}/pods")["items"]
    assert len(pods) == deployment["spec"]["replicas"]
    for pod in pods:
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
        assert pod["spec"]["nodeName"] == own_plane.node
        assert pod["spec"]["serviceAccountName"] == NAME
        # The ServiceAccount admission plugin mounted a projected token, as on any cluster.
        assert any("projected" in v for v in pod["spec"]["volumes"]), pod["spec"]["volumes"]

    before = installed_objects(own_plane)
    again = run_kubemill(own_plane, "install", "--image", OPERATOR_IMAGE, "--timeout", "120")
    assert again.returncode == 0, again.stdout + again.stderr
    assert installed_objects(own_plane) == before, "a second install changed objects"


def test_uninstall_leaves_the_crds_and_uninstall_crds_leaves_nothing(
    own_plane: ControlPlane, own_node: NodeStandIn
) -> None:
    if absent(own_plane, f"/api/v1/namespaces/{DEFAULT_NAMESPACE}"):
        installed = run_kubemill(
            own_plane, "install", "--image", OPERATOR_IMAGE, "--timeout", "120"
        )
        assert installed.returncode == 0, installed.stderr
    kept = run_kubemill(own_plane, "uninstall")
    assert kept.returncode == 0, kept.stdout + kept.stderr
    crd_paths = [
        f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{c['metadata']['name']}"
        for c in crds()
    ]
    cluster_wide = [
        f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{NAME}",
        f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{NAME}",
    ]
    # The real namespace controller finalizes the namespace: its pods stop on the node first.
    eventually(
        lambda: absent(own_plane, f"/api/v1/namespaces/{DEFAULT_NAMESPACE}"),
        timeout=90,
        what="the operator's namespace to be finalized",
    )
    assert all(absent(own_plane, p) for p in cluster_wide)
    assert all(not absent(own_plane, p) for p in crd_paths)

    installed = run_kubemill(own_plane, "install", "--image", OPERATOR_IMAGE, "--timeout", "120")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    gone = run_kubemill(own_plane, "uninstall", "--crds")
    assert gone.returncode == 0, gone.stdout + gone.stderr
    eventually(
        lambda: all(absent(own_plane, p) for p in crd_paths),
        timeout=90,
        what="the CRDs to be deleted",
    )
    eventually(
        lambda: absent(own_plane, f"/api/v1/namespaces/{DEFAULT_NAMESPACE}"),
        timeout=90,
        what="the operator's namespace to be finalized",
    )
    assert all(absent(own_plane, p) for p in cluster_wide)
    leftovers = own_plane.request("GET", "/api/v1/pods")["items"]
    assert not [
        p["metadata"]["name"] for p in leftovers if p["metadata"]["namespace"] == DEFAULT_NAMESPACE
    ]
