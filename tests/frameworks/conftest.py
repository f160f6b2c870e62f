"""Fixtures of the framework tests."""

from __future__ import annotations

import pytest
from framework_networks import LoopbackNetwork


@pytest.fixture
def loopback() -> LoopbackNetwork:
    """A fresh local-style network (127.0.0.1, distinct ports)."""
    return LoopbackNetwork()
