"""Fixtures for operator tests (:mod:`support.operator_fixtures`; the helpers live in
:mod:`support.operator_support`), and the order they run in."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.operator_fixtures import cluster, kubelet, namespace, operator

__all__ = ["cluster", "kubelet", "namespace", "operator"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the RBAC usage check last: it reads the calls of every other operator test."""
    items.sort(key=lambda item: item.path == Path(__file__).with_name("test_rbac.py"))
