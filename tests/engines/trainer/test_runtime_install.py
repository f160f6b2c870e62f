"""An install that asks for the runtimes (``install_manifests(extras=["runtimes"])``, what
``kubemill install --runtimes`` installs): the runtimes' CRDs with the others, the default
ClusterTrainingRuntimes last, applied against the kmock cluster once their CRDs are
established, and unchanged when applied again."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from kubemill.engines.trainer.api.defaults import DEFAULT_RUNTIMES
from kubemill.substrates.kubernetes.client.connection import Http, connect
from kubemill.substrates.kubernetes.install import install, install_manifests
from support.kube_client_support import ClientClusterThread, kmock_cluster

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
RUNTIMES = "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes"
NAMES = [doc["metadata"]["name"] for doc in DEFAULT_RUNTIMES]


@contextmanager
def establishing(cluster: ClientClusterThread) -> Iterator[None]:
    """The apiextensions controller, reduced to the condition install waits for."""
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(0.05):
            for crd in cluster.list(CRDS):
                if not (crd.get("status") or {}).get("conditions"):
                    established = {"type": "Established", "status": "True", "reason": "Test"}
                    cluster.request(
                        "PATCH", f"{CRDS}/{crd['metadata']['name']}/status",
                        {"status": {"conditions": [established]}},
                        content_type="application/merge-patch+json",
                    )  # fmt: skip

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)


def test_the_runtimes_come_with_their_crds_and_after_the_operator() -> None:
    plain = install_manifests()
    objects = install_manifests(extras=["runtimes"])
    kinds = [o["kind"] for o in objects]
    crd_names = [o["metadata"]["name"] for o in objects if o["kind"] == "CustomResourceDefinition"]
    assert crd_names[-2:] == [
        "trainingruntimes.trainer.kubeflow.org",
        "clustertrainingruntimes.trainer.kubeflow.org",
    ]
    assert kinds[-len(NAMES) - 1 :] == ["Deployment"] + ["ClusterTrainingRuntime"] * len(NAMES)
    assert [o["metadata"]["name"] for o in objects[-len(NAMES) :]] == NAMES
    assert len(objects) == len(plain) + 2 + len(NAMES)
    with pytest.raises(ValueError, match="extras: nope unknown; an install can add runtimes"):
        install_manifests(extras=["nope"])


def test_an_install_applies_the_runtimes_once_their_crds_are_served(tmp_path: Path) -> None:
    objects = install_manifests(extras=["runtimes"])
    without_operator = [o for o in objects if o["kind"] != "Deployment"]
    with ClientClusterThread() as cluster, establishing(cluster):
        config = kmock_cluster.write_kubeconfig(tmp_path / "kubeconfig", cluster.url)
        http = Http(connect(kubeconfig=str(config), context="kmock"))
        applied = install(http, without_operator)
        assert [(a.name, a.action) for a in applied if a.kind == "ClusterTrainingRuntime"] == [
            (name, "created") for name in NAMES
        ]
        stored = cluster.get(f"{RUNTIMES}/torch-distributed")
        assert stored["spec"]["mlPolicy"]["torch"]["numProcPerNode"] == "auto"
        again = install(http, without_operator)
        assert {a.action for a in again if a.kind == "ClusterTrainingRuntime"} == {"unchanged"}
