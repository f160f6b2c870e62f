"""Fixtures of the local-substrate tests: a private state directory and a backend that
proves, at the end of every test, that no process of any of its jobs is left running."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kubemill.substrates.local import LocalBackend, SupervisorOptions, procinfo


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No user config or state leaks in: both point into ``tmp_path``."""
    monkeypatch.setenv("KUBEMILL_CONFIG", str(tmp_path / "no-config.yaml"))
    monkeypatch.setenv("KUBEMILL_STATE_DIR", str(tmp_path / "env-state"))
    return tmp_path


@pytest.fixture
def backend(isolated: Path) -> Iterator[LocalBackend]:
    """A backend on a fresh state directory; fails the test if a process outlives it."""
    local = LocalBackend(isolated / "state", supervisor_options=SupervisorOptions())
    yield local
    leftovers: list[str] = []
    for rec in local.store.jobs():
        if rec.finished and rec.supervisor_state == "done":
            for replica in local.store.replicas(rec.uid):
                if replica.process and procinfo.group_members(replica.process.pid):
                    leftovers.append(f"{replica.name} (pgid {replica.process.pid})")
        local.delete(rec.name, rec.namespace)
        if rec.supervisor is not None and rec.supervisor_mode == "detached":
            procinfo.kill_process(rec.supervisor)
    assert not leftovers, f"processes outlived their finished job: {leftovers}"
