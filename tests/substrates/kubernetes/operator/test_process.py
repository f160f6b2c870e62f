"""The operator process's start-up settings of the garbage collector: the frozen
generation and the young threshold (:mod:`kubemill.substrates.kubernetes.operator.process`)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from kubemill.substrates.kubernetes.operator import process


@pytest.fixture
def restored_collector() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def test_settle_freezes_what_exists_and_collects_the_young_less_often(
    restored_collector: None,
) -> None:
    before = gc.get_freeze_count()
    older = gc.get_threshold()[1:]
    process.settle()
    assert gc.get_freeze_count() > before
    assert gc.get_threshold() == (process.GC_YOUNG_THRESHOLD, *older)
