"""The toy plugin engine, registered as a user registers one (``KUBEMILL_ENGINES``).

The variable and ``PYTHONPATH`` are set for the test, so processes it starts (a detached
supervisor, the operator) load the engine too; this process registers it now.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubemill.kinds import unregister
from kubemill.substrates.plugins import load_plugins

HERE = Path(__file__).resolve().parent


def _plugins(monkeypatch: pytest.MonkeyPatch, entries: str) -> Iterator[None]:
    monkeypatch.setenv("KUBEMILL_ENGINES", entries)
    path = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", f"{HERE}{os.pathsep}{path}" if path else str(HERE))
    added = load_plugins()
    yield
    for engine in reversed(added):
        unregister(engine.kind)


@pytest.fixture
def toy_plugin(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield from _plugins(monkeypatch, "toy_engine:ENGINE")


@pytest.fixture
def toy_service_plugin(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The toy service cluster (``toy_service_engine.py``)."""
    yield from _plugins(monkeypatch, "toy_service_engine:ENGINE")


@pytest.fixture
def toy_controller_plugin(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The toy controller (``toy_controller_engine.py``) and the kind its runs are of."""
    yield from _plugins(monkeypatch, "toy_engine:ENGINE,toy_controller_engine:CONTROLLER")
