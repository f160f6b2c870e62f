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


@pytest.fixture
def toy_plugin(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("KUBEMILL_ENGINES", "toy_engine:ENGINE")
    path = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", f"{HERE}{os.pathsep}{path}" if path else str(HERE))
    added = load_plugins()
    yield
    for engine in added:
        unregister(engine.kind)
