"""The reads of a recorded local job beyond its view: its logs followed to the end, its
progress history, its events, its resource samples and the note on its children.

Apart from :mod:`.job_views` (which the backend imports, and with it every submission):
these reads' modules (the log readers, the progress and resource histories) and records
(:mod:`kubemill.substrates.reads`) are loaded only by a command that reads them, each of
the backend's read methods importing this module when called.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

from kubemill.kinds import child_pods_of
from kubemill.substrates.base import Children
from kubemill.substrates.local.launch import progress_dir, progress_file
from kubemill.substrates.local.log_reads import ReplicaLog, follow
from kubemill.substrates.local.progress import history
from kubemill.substrates.local.sampling import resource_history
from kubemill.substrates.local.store import JobRecord, Store
from kubemill.substrates.reads import EventRecord, LogLine, ProgressPoint, ResourceReport

FOLLOW_INTERVAL = 0.05
"""Seconds between two looks for new log lines when following a job (the end of a job
supervised here cuts the pause short: its last lines need no quicker looks)."""
FOLLOW_CHECK_EVERY = 0.1
"""How often a follower of a job supervised elsewhere asks the database whether it ended."""


def follow_replicas(
    logs: Sequence[ReplicaLog], supervised: threading.Event | None, ended: Callable[[], bool]
) -> Iterator[LogLine]:
    """The replicas' lines as they are written, until the job ends: ``supervised`` (the
    ``finished`` flag of a supervisor in a thread of this process) if there is one, else
    ``ended`` (which reads the records) says when."""
    if supervised is not None:
        # Supervised by a thread of this process (`kubemill run`): its own flag says when it
        # let go of the job (no replica can write any more), without a database read, so
        # it is asked on every pass, and setting it ends the pause between two passes: the
        # last lines are printed as soon as the job ends.
        done = supervised
        yield from follow(
            logs, finished=done.is_set, interval=FOLLOW_INTERVAL, check_every=0.0, pause=done.wait
        )
        return
    yield from follow(logs, finished=ended, check_every=FOLLOW_CHECK_EVERY)


def progress_history(store: Store, rec: JobRecord) -> list[ProgressPoint]:
    """Every report of the first replica (in plan order) that made one."""
    directory = Path(progress_dir(str(rec.job_dir)))
    for replica in store.replicas(rec.uid):
        points = history(Path(progress_file(str(directory), replica.name)))
        if points:
            return points
    return []


def event_records(store: Store, uid: str) -> list[EventRecord]:
    """The job's events, oldest first."""
    out: list[EventRecord] = []
    for row in store.events(uid):
        out.append(
            EventRecord(
                time=datetime.fromtimestamp(row.time, UTC),
                type="Warning" if row.type == "Warning" else "Normal",
                reason=row.reason,
                message=row.message,
                count=row.count,
            )
        )
    return out


def resources(store: Store, rec: JobRecord) -> ResourceReport:
    """Each replica's CPU and memory as its supervisor sampled them (:mod:`.sampling`)."""
    return ResourceReport(resource_history(rec.job_dir))


def children(rec: JobRecord) -> Children | None:
    """Locally a program makes no pods: its kind's note says what its children are."""
    hook = child_pods_of(rec.kind)
    return None if hook is None else Children(hook.title, note=hook.local)
