"""Fixtures for the tests against a real Kubernetes control plane (tests/support/control_plane.py).

One control plane serves this package's tests, and stops after them: etcd, kube-apiserver,
kube-controller-manager and kube-scheduler of the release tools/kube pins, with the node
stand-in playing the pods bound to its Node. The binaries are built once per machine
(scripts/kube-control-plane.sh build; .ci/run builds them before pytest, so here it is a
cache hit).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubemill.kinds import entries
from kubemill.substrates.kubernetes.install import DEFAULT_NAMESPACE, NAME
from support.control_plane import ControlPlane, build, running_control_plane
from support.node import NodeStandIn, node_stand_in
from support.real_operator import RealOperator, run_kubemill
from support.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here starts (or shares) the real control plane: `--fast` leaves them out,
    and with pytest-xdist's workers (``-n 2 --dist loadgroup``, as scripts/test.sh runs) they
    all run in one worker, so that one control plane serves them."""
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.control_plane)
            item.add_marker(pytest.mark.xdist_group("control_plane"))


@pytest.fixture(scope="session")
def control_plane_bin() -> Path:
    return build(ROOT)


@pytest.fixture(scope="package")
def control_plane(
    control_plane_bin: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    with running_control_plane(tmp_path_factory.mktemp("kube"), control_plane_bin) as plane:
        yield plane
    assert not plane.alive(), f"control plane processes left: {plane.alive()}"


@pytest.fixture(scope="package")
def node(control_plane: ControlPlane) -> Iterator[NodeStandIn]:
    with node_stand_in(control_plane) as stand_in:
        yield stand_in


OPERATOR_IMAGE = "kubemill-operator:test"
"""No image runs here: the Deployment's pods are played by the node stand-in, and the
operator itself runs as a local process with the Deployment's own arguments."""


@pytest.fixture(scope="package")
def installed(control_plane: ControlPlane, node: NodeStandIn) -> dict[str, Any]:
    """`kubemill install --serve-upstream-groups --runtimes` on the session's control plane
    (the training runtimes' CRDs and defaults, which the operator lists and watches), with
    the Kubeflow-shaped upstream CRDs a Kubeflow install would have left; the operator
    Deployment."""
    done = run_kubemill(
        control_plane,
        "install",
        "--serve-upstream-groups",
        "--runtimes",
        "--image",
        OPERATOR_IMAGE,
        "--timeout",
        "120",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for crd in upstream_crds():
        control_plane.request(
            "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd
        )
    for crd in upstream_crds():
        name = crd["metadata"]["name"]
        eventually(
            lambda name=name: established(control_plane, name), what=f"CRD {name} established"
        )
    path = f"/apis/apps/v1/namespaces/{DEFAULT_NAMESPACE}/deployments/{NAME}"
    return control_plane.request("GET", path)  # type: ignore[no-any-return]


def established(plane: ControlPlane, crd: str) -> bool:
    served = plane.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}")
    return any(
        c["type"] == "Established" and c["status"] == "True"
        for c in served.get("status", {}).get("conditions", [])
    )


def upstream_crds() -> list[dict[str, Any]]:
    from support.upstream_crds import upstream_crd

    return [
        upstream_crd(engine.kind, group, version)
        for engine in entries()
        for group, version in engine.api.upstream_groups
    ]


@pytest.fixture(scope="package")
def operator(
    control_plane: ControlPlane, installed: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealOperator]:
    """The operator, as a local process with the Deployment's arguments, authenticated as its
    own ServiceAccount by a token from the real TokenRequest API: never as admin."""
    workdir = tmp_path_factory.mktemp("operator")
    container = installed["spec"]["template"]["spec"]["containers"][0]
    with RealOperator(control_plane, workdir, container["args"]) as running:
        yield running
    refused = running.refused()
    assert not refused, f"the operator's ServiceAccount was refused: {refused}"
    # Seen once in CI: a pod create answered 403 by admission, not by RBAC. Said, so that the
    # next one is explained; the operator retries such a create.
    for refusal in running.refused_by_admission():
        warnings.warn(f"refused by admission (not RBAC): {refusal}", stacklevel=1)
