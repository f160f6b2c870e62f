"""Fixtures for the end-to-end tests (helpers live in :mod:`support.e2e_support`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.e2e_support import Cli, fresh_cli


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    """The CLI with a fresh state directory; deletes every job it left at the end."""
    with fresh_cli(tmp_path) as runner:
        yield runner
