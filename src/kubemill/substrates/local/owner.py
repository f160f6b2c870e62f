"""A job's owner process: the process whose end deletes the job (``SubmitOptions.owner_pid``).

On Kubernetes an object whose owner is deleted is deleted by the garbage collector. Locally
the owner a program can give its job is a process, usually itself: a program that starts a
service for its own use (``kubemill.deploy.local.new_cluster``) wants it gone when the
program ends, however it ends, SIGKILL included, while the service runs under a detached
supervisor the program's death does not reach.

The owner is recorded at submit, identified by pid *and* start time (:mod:`.procinfo`), in
the job's directory (``owner.json``), so that whichever supervisor runs the job (a resumed
job gets a new one) watches the same process, and a pid reused by a stranger is never taken
for it. The supervisor looks at it as often as at its requests; once the owner is gone it
stops every replica (their grace period, then SIGKILL) and removes the job, as it does when
a job's ``ttlSecondsAfterFinished`` has passed.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from kubemill.api import Job
from kubemill.kinds import is_controller
from kubemill.substrates.base import SubstrateError
from kubemill.substrates.local import procinfo

OWNER_FILE = "owner.json"
OWNER_GONE = "owner-gone"
"""What the supervisor's request check returns once the job's owner has ended."""


def owner_process(job: Job, pid: int) -> procinfo.ProcessId:
    """The process ``pid`` as the owner of ``job``; refused for a pid that names no live
    process, and for a controller (it runs no replicas: the jobs it makes may have one)."""
    if is_controller(job.KIND):
        raise SubstrateError(
            f"owner_pid: a {job.KIND} runs no replicas of its own to stop with a process"
        )
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        raise SubstrateError(f"owner_pid: expected a process id, got {pid!r}")
    owner = procinfo.identify(pid)
    if owner is None:
        raise SubstrateError(f"owner_pid: no process {pid} is running (or it is not yours)")
    return owner


def write_owner(job_dir: Path, owner: procinfo.ProcessId) -> None:
    """Record ``owner`` in the job's directory (atomically: a reader sees all or nothing)."""
    temp = job_dir / f".{OWNER_FILE}.tmp"
    temp.write_text(json.dumps(asdict(owner)) + "\n", encoding="utf-8")
    temp.replace(job_dir / OWNER_FILE)


def owner_of(job_dir: str | Path) -> procinfo.ProcessId | None:
    """The job's owner as recorded (None: it has none, or the record is unreadable)."""
    try:
        data = json.loads((Path(job_dir) / OWNER_FILE).read_text(encoding="utf-8"))
        return procinfo.ProcessId(
            pid=int(data["pid"]), start_ticks=int(data["start_ticks"]), boot_id=str(data["boot_id"])
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


__all__ = ["OWNER_FILE", "OWNER_GONE", "owner_of", "owner_process", "write_owner"]
