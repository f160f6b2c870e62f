"""Fixtures of the engines' tests: the real CLI over a state directory of its own, and the
operator tests' (:mod:`support.operator_fixtures`) for an engine's operator tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.e2e_support import Cli, fresh_cli
from support.operator_fixtures import cluster, kubelet, namespace, operator

__all__ = ["cli", "cluster", "kubelet", "namespace", "operator"]


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    """The real CLI; nothing it started outlives the test (:func:`fresh_cli`)."""
    with fresh_cli(tmp_path) as runner:
        yield runner
