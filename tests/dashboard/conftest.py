"""Fixtures of the dashboard's tests: a live local substrate on a private state directory,
the dashboard's aiohttp application over it, and small real jobs (``python -c`` programs).

At the end of each test every job is deleted (which stops its replicas) and the detached
supervisors it started are stopped, so nothing outlives the test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from aiohttp.test_utils import TestClient, TestServer
from dashboard_support import cleanup

from kubemill.dashboard.security import Guard
from kubemill.dashboard.server import build_app
from kubemill.sdk import JobClient

POLL = 0.1
"""The dashboard's polling interval in these tests: changes show within a tenth of a second."""


@pytest.fixture
def jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[JobClient]:
    """The SDK client of a fresh local state directory (no user config or state leaks in)."""
    monkeypatch.setenv("KUBEMILL_CONFIG", str(tmp_path / "no-config.yaml"))
    monkeypatch.setenv("KUBEMILL_STATE_DIR", str(tmp_path / "env-state"))
    client = JobClient("local", state_dir=tmp_path / "state")
    yield client
    cleanup(client)


@pytest.fixture
def guard() -> Guard:
    return Guard()


@pytest_asyncio.fixture
async def web(jobs: JobClient, guard: Guard) -> AsyncIterator[TestClient[object, object]]:
    """An HTTP client of the dashboard served on a loopback port."""
    app = build_app(jobs, guard=guard, poll_seconds=POLL)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield client
