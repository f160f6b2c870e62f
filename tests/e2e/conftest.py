"""Fixtures for the end-to-end tests (helpers live in :mod:`support.e2e_support`)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.e2e_support import Cli, processes_with_token


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    """The CLI with a fresh state directory; deletes every job it left at the end."""
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    runner = Cli(state_dir=state_dir, cwd=workdir)
    yield runner
    for name in runner.job_names():
        runner("delete", name)
    for pid in processes_with_token(runner.token):  # never leave a process behind
        os.kill(pid, signal.SIGKILL)
