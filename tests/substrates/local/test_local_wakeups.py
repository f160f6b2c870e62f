"""The supervisor moves on events, not on its timers: with every timer of its loop set far
beyond the test's patience, a staged job (hosts, then a client once they are ready, as an
MPI launcher after its workers) still starts each stage and ends as soon as its processes
allow. Were a step waiting on a timer, the job would not finish in time."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from exec_support import register_toy_hosts, submit
from toy_host_engine import manifest

from kubemill.substrates.local import LocalBackend, SupervisorOptions

FOREVER = 3600.0
"""Every timer of the loop: an hour, so only events can move the job along."""
PATIENCE = 60.0
"""Far longer than the job needs on a loaded machine; far shorter than :data:`FOREVER`."""


@pytest.fixture
def toy_hosts(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield from register_toy_hosts(monkeypatch)


@pytest.fixture
def sleepy(isolated: Path) -> Iterator[LocalBackend]:
    """A backend whose supervisors look at nothing on a timer within the test."""
    options = SupervisorOptions(
        poll_interval=FOREVER,
        request_interval=FOREVER,
        resync_interval=FOREVER,
        memory_interval=FOREVER,
        progress_interval=FOREVER,
    )
    local = LocalBackend(isolated / "state", supervisor_options=options)
    yield local
    for rec in local.store.jobs():
        local.delete(rec.name, rec.namespace)


def test_each_stage_starts_and_the_job_ends_on_events_alone(
    toy_hosts: None, sleepy: LocalBackend, tmp_path: Path
) -> None:
    doc = manifest("staged", client=["python", "-c", "print('client ran', flush=True)"])
    submit(sleepy, doc, tmp_path, detach=False)
    done = sleepy.wait("staged", timeout=PATIENCE)
    assert done.finished, [(r.name, r.phase) for r in done.replicas]
    assert done.phase == "Succeeded", done.status
    phases = {r.replica_type: r.phase for r in done.replicas}
    assert phases == {"Client": "Succeeded", "Host": "Stopped"}
