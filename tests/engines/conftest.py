"""Fixtures of the engines' tests: the real CLI over a state directory of its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.e2e_support import Cli, fresh_cli


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    """The real CLI; nothing it started outlives the test (:func:`fresh_cli`)."""
    with fresh_cli(tmp_path) as runner:
        yield runner
