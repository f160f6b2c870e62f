"""The operator process's start-up settings: the collector's frozen generation and young
threshold, and the malloc arena cap (:mod:`kubemill.substrates.kubernetes.operator.process`)."""

from __future__ import annotations

import gc
import platform
from collections.abc import Iterator

import pytest

from kubemill.substrates.kubernetes.operator import process


@pytest.fixture
def unfrozen() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def test_settle_freezes_what_exists_and_caps_the_arenas(
    unfrozen: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    capped: list[int] = []
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.setattr(process, "limit_malloc_arenas", lambda n: capped.append(n) or True)
    before = gc.get_freeze_count()
    process.settle()
    assert gc.get_freeze_count() > before
    assert gc.get_threshold()[0] == process.GC_YOUNG_THRESHOLD
    assert capped == [process.MALLOC_ARENAS]


def test_an_arena_limit_given_in_the_environment_is_left_as_it_is(
    unfrozen: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    capped: list[int] = []
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    monkeypatch.setattr(process, "limit_malloc_arenas", lambda n: capped.append(n) or True)
    process.settle()
    assert capped == []


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="arenas are glibc's")
def test_glibc_takes_the_arena_limit() -> None:
    # The process default is no limit: setting one for the test process is harmless.
    assert process.limit_malloc_arenas(process.MALLOC_ARENAS) is True
