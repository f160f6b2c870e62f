"""A job with an owner process (``SubmitOptions.owner_pid``): stopped and removed by its
detached supervisor once that process has ended, however it ended; refused for a process
that is not running. Without an owner, a detached job outlives the program that submitted
it (tests/substrates/local/test_local_detached.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from local_support import SLEEPER, log_text, pytorch_job

from kubemill.substrates.base import JobNotFound, SubmitOptions, SubstrateError
from kubemill.substrates.local import LocalBackend, procinfo
from kubemill.substrates.local.owner import OWNER_FILE
from support.waiting import eventually


def test_a_job_goes_with_its_owner_killed_and_leaves_no_process(
    backend: LocalBackend, tmp_path: Path
) -> None:
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        job = pytorch_job("owned", master=SLEEPER, worker=SLEEPER)
        options = SubmitOptions(detach=True, base_dir=str(tmp_path), owner_pid=owner.pid)
        backend.submit(job, options)
        eventually(
            lambda: (
                log_text(backend, "owned", "master-0") == "up"
                and log_text(backend, "owned", "worker-0") == "up"
            ),
            what="both replicas up",
        )
        rec = backend.store.job("default", "owned")
        assert (Path(rec.job_dir) / OWNER_FILE).is_file()
        groups = [r.pid for r in backend.get("owned").replicas if r.pid]
        assert len(groups) == 2
        supervisor = rec.supervisor
        assert supervisor is not None
        # Running while its owner lives.
        eventually(lambda: backend.get("owned").phase == "Running", what="the job Running")
    finally:
        owner.kill()
        owner.wait()
    # The supervisor stops the replicas and removes the job, records and directory.
    assert procinfo.wait_gone(supervisor, timeout=60)
    assert all(not procinfo.group_members(pgid) for pgid in groups)
    with pytest.raises(JobNotFound):
        backend.get("owned")
    assert not Path(rec.job_dir).exists()
    assert not procinfo.marked(f"{rec.uid}/")


def test_an_owner_that_is_not_running_is_refused_and_nothing_is_recorded(
    backend: LocalBackend, tmp_path: Path
) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    job = pytorch_job("orphaned", master=SLEEPER)
    with pytest.raises(SubstrateError, match=f"owner_pid: no process {gone.pid} is running"):
        backend.submit(job, SubmitOptions(detach=True, base_dir=str(tmp_path), owner_pid=gone.pid))
    with pytest.raises(JobNotFound):
        backend.get("orphaned")
    assert not list((backend.state_dir / "jobs").glob("*/orphaned-*"))
