"""Fixtures for the Kubernetes client tests: a served cluster, a kubeconfig, a backend.

The cluster and its helpers live in :mod:`support.kube_client_support`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kubemill.substrates.kubernetes.client import KubernetesBackend
from support.kube_client_support import ClientClusterThread, Operator, kmock_cluster


@pytest.fixture
def cluster() -> Iterator[ClientClusterThread]:
    """A served cluster with the kubemill CRDs installed."""
    with ClientClusterThread() as thread:
        thread.install_crds()
        yield thread


@pytest.fixture
def bare_cluster() -> Iterator[ClientClusterThread]:
    """A served cluster without the kubemill CRDs."""
    with ClientClusterThread() as thread:
        yield thread


@pytest.fixture
def kubeconfig(tmp_path: Path, cluster: ClientClusterThread) -> Path:
    return kmock_cluster.write_kubeconfig(tmp_path / "kubeconfig", cluster.url)


@pytest.fixture
def backend(kubeconfig: Path) -> Iterator[KubernetesBackend]:
    client = KubernetesBackend(kubeconfig=kubeconfig, poll_interval=0.05)
    yield client
    client.close()


@pytest.fixture
def operator(cluster: ClientClusterThread) -> Operator:
    return Operator(cluster)
