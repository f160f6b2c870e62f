"""The operator tests' fixtures, for every folder that has such tests (the operator's own,
and an engine's under ``tests/engines/<engine>/``): one emulated API server and one operator
(every namespace, upstream groups served) a module, a fresh namespace and a kubelet stand-in
a test. A conftest imports them; the helpers live in :mod:`support.operator_support`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.operator_support import Cluster, Kubelet, Operator, running_cluster, running_operator


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
