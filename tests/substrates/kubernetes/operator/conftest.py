"""Fixtures for operator tests (the helpers live in :mod:`support.operator_support`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.operator_support import Cluster, Kubelet, Operator, running_cluster, running_operator

# --- fixtures ------------------------------------------------------------------------------


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the RBAC usage check last: it reads the calls of every other operator test."""
    items.sort(key=lambda item: item.path == Path(__file__).with_name("test_rbac.py"))


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with running_cluster() as served:
        yield served


@pytest.fixture(scope="module")
def operator(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    workdir = tmp_path_factory.mktemp("operator")
    with running_operator(cluster, workdir, "--all-namespaces", "--serve-upstream-groups") as op:
        yield op


@pytest.fixture
def namespace(cluster: Cluster) -> str:
    return cluster.namespace()


@pytest.fixture
def kubelet(cluster: Cluster, namespace: str) -> Kubelet:
    return Kubelet(cluster, namespace)
