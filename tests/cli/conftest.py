"""Fixtures for the CLI tests: an isolated state directory, the typer runner, the real CLI.

Fast tests call the typer app in-process; the tests that run jobs start the real
``kubemill`` console script (next to this interpreter) as a subprocess, with
``KUBEMILL_STATE_DIR`` pointing at a temporary directory.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import Kubemill
from typer.testing import CliRunner


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private local-substrate state directory, also set for in-process runs."""
    directory = tmp_path / "state"
    directory.mkdir()
    monkeypatch.setenv("KUBEMILL_STATE_DIR", str(directory))
    monkeypatch.delenv("KUBEMILL_SUBSTRATE", raising=False)
    return directory


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def kubemill(state_dir: Path, tmp_path: Path) -> Iterator[Kubemill]:
    """The real CLI in a subprocess; deletes every job it left at the end."""
    cli = Kubemill(state_dir, tmp_path)
    yield cli
    listed = cli("get", "-o", "json")
    if listed.returncode == 0:
        for item in json.loads(listed.stdout).get("items", []):
            cli("delete", item["metadata"]["name"])
