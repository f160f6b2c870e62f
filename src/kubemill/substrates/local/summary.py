"""Where local state lives, and the one-row-per-job summary ``kubemill get`` lists.

Kept free of pydantic, the job models and the core (only the standard library and
:mod:`.procinfo`), so a listing costs an interpreter start and one SQL query, not the
import of every model and the validation of every stored manifest: ``kubemill get`` of a
thousand jobs read each manifest back into its model twice and took 0.65 s.

The ``jobs`` table keeps what the listing needs of the manifest beside it, written with
the job (:mod:`.store`): ``wanted`` (the replicas the spec asks for) and ``ttl``
(``ttlSecondsAfterFinished``). The phase is read from the stored status (a JSON
decode, 4 ms for a thousand jobs: a copy in a column of its own could go stale under a
writer that does not know it), ready replicas and restarts are counted from the
``replicas`` rows in the same query. A schedule (its status has ``scheduleState``) has no
replicas: its row carries its schedule state, ``Suspended`` while its manifest's
``spec.suspend`` says so (read for schedules only), and its last run.

A listing must tell the same truth as a full read, which heals jobs whose supervisor died
and deletes finished jobs whose ``ttlSecondsAfterFinished`` has passed (the core decides
both). :func:`read_summaries` therefore answers ``None`` -- "do the full read" -- when
any listed job needs either, and whenever the database is not one it can read as it is
(missing, of an older schema not yet migrated, damaged, locked): the full read creates,
migrates, heals or reports it with the usual one-line error.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from kubemill.substrates.local import procinfo

STATE_DIR_ENV = "KUBEMILL_STATE_DIR"
DB_NAME = "kubemill.db"
SCHEMA_VERSION = 2
"""1: the first schema; 2: ``jobs.wanted`` and ``jobs.ttl`` for listing."""
BUSY_TIMEOUT_MS = 10_000
SUPERVISOR_START_GRACE = 30.0
"""A job recorded this long ago without any supervisor pid has lost its submitter."""
READY_PHASES = ("Running", "Succeeded")
"""A replica counts as ready while it runs and once it has succeeded."""


def default_state_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Where state lives: ``explicit``, else ``$KUBEMILL_STATE_DIR``, else XDG's state dir."""
    if explicit is not None:
        return Path(explicit).expanduser()
    from_env = os.environ.get(STATE_DIR_ENV)
    if from_env:
        return Path(from_env).expanduser()
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "state"
    return base / "kubemill"


def phase_of(status: Mapping[str, Any], *, finished: bool = False) -> str:
    """The phase of a job status in its wire form, as ``JobStatus.phase`` words it: the
    last True condition (Failed, then Succeeded, win), else ``Pending``; for a kind with
    an application state (Spark's ``applicationState``), that state, as its status words
    it (unless the conditions say it finished and the state does not).

    ``finished`` is the core's verdict recorded beside the status: a finished job that did
    not fail is ``Succeeded`` whatever word its kind's conditions give success on the wire
    (a kind's :class:`~kubemill.api.ConditionVocabulary`), which this listing, free of the
    models, does not read."""
    conditions = status.get("conditions") or []
    true_ones = [
        str(c.get("type"))
        for c in conditions
        if isinstance(c, Mapping) and c.get("status") == "True"
    ]
    application = status.get("applicationState")
    if isinstance(application, Mapping):
        state = str(application.get("state") or "")
        ended = "Failed" in true_ones or "Succeeded" in true_ones
        if not ended or state in ("COMPLETED", "FAILED"):
            return state or "NEW"
    for terminal in ("Failed", "Succeeded"):
        if terminal in true_ones:
            return terminal
    if finished:
        return "Succeeded"
    return true_ones[-1] if true_ones else "Pending"


SCHEDULE_STATE = "scheduleState"
"""The status field only a schedule's status has (a ScheduledSparkApplication's, empty
before its first pass): what tells a schedule in the listing, without the models."""
SUSPENDED = "Suspended"


def schedule_phase(state: str, *, suspended: bool) -> str:
    """A schedule's word in the job list: ``Suspended`` while its ``spec.suspend`` keeps
    new runs from starting (upstream's state stays ``Scheduled`` then, with ``suspend``
    in a column of its own, which the job list has not), else its state (``New`` before
    its first pass, ``Scheduled``, ``FailedValidation``)."""
    word = state or "New"
    return SUSPENDED if suspended and word in ("New", "Scheduled") else word


@dataclass(frozen=True)
class ProgressSummary:
    """What ``kubemill get`` shows of a job's ``status.trainerStatus``."""

    percent: int | None
    step: int | None
    total: int | None
    eta: int | None
    """``estimatedRemainingSeconds``."""


def progress_of(status: Mapping[str, Any]) -> ProgressSummary | None:
    """A status's ``trainerStatus`` in its wire form, None if the job reported none."""
    trainer = status.get("trainerStatus")
    if not isinstance(trainer, Mapping):
        return None

    def number(key: str) -> int | None:
        value = trainer.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return ProgressSummary(
        number("progressPercentage"),
        number("step"),
        number("total"),
        number("estimatedRemainingSeconds"),
    )


NOT_KNOWN = "-"
"""A progress cell with nothing to show (every table's ``-``)."""


def progress_text(percent: int | None, step: int | None, total: int | None) -> str:
    """``45%``; ``step 3`` without a total; ``-`` before any report."""
    if percent is not None:
        return f"{percent}%"
    if step is not None:
        return f"step {step}" if total is None else f"{step}/{total}"
    return NOT_KNOWN


def eta_text(seconds: int | None, *, finished: bool) -> str:
    """The estimated time left: ``42s``, ``5m10s``, ``3h05m``, ``2d04h``; ``-`` when
    unknown or once the job has finished (the estimate was of a run that is over)."""
    if seconds is None or finished:
        return NOT_KNOWN
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"


@dataclass(frozen=True)
class JobSummary:
    """One line of ``kubemill get``."""

    namespace: str
    name: str
    kind: str
    phase: str
    ready: int
    total: int
    """The replicas the job asks for, or the replicas it has if that is more."""
    restarts: int
    created: float
    endpoint: str = ""
    """Where a service cluster serves (``status.endpoint``), "" for none."""
    schedule: bool = False
    """A schedule (it has no replicas; its runs are jobs of their own)."""
    last_run: float | None = None
    """A schedule's ``status.lastRun`` (seconds since the epoch), None before its first."""
    last_run_name: str = ""
    """A schedule's ``status.lastRunName``."""
    progress: ProgressSummary | None = None
    """The program's progress reports (``status.trainerStatus``), None if it made none."""
    finished: bool = False


_QUERY = """
SELECT jobs.namespace, jobs.name, jobs.kind, jobs.wanted, jobs.ttl,
       jobs.finished, jobs.status, jobs.created, jobs.supervisor_state, jobs.supervisor_pid,
       jobs.supervisor_start, jobs.supervisor_boot,
       CASE WHEN instr(jobs.status, '"{schedule_state}"') > 0
            THEN json_extract(jobs.manifest, '$.spec.suspend') END AS schedule_suspend,
       COUNT(replicas.name) AS present,
       COALESCE(SUM(replicas.phase IN ({ready})), 0) AS ready,
       COALESCE(SUM(replicas.restart_count + replicas.retired_restarts), 0) AS restarts
FROM jobs LEFT JOIN replicas ON replicas.job_uid = jobs.uid
{where}
GROUP BY jobs.uid
ORDER BY jobs.created, jobs.name
"""


def read_summaries(
    state_dir: str | os.PathLike[str] | None = None,
    namespace: str | None = None,
    *,
    now: float | None = None,
) -> list[JobSummary] | None:
    """Every job (of ``namespace``), oldest first; ``None`` when a full read is needed."""
    path = default_state_dir(state_dir) / DB_NAME
    if not path.is_file():
        return None
    moment = time.time() if now is None else now
    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    except sqlite3.Error:
        return None
    try:
        if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            return None
        marks = ",".join("?" for _ in READY_PHASES)
        where, args = ("WHERE jobs.namespace = ?", (namespace,)) if namespace else ("", ())
        query = _QUERY.format(ready=marks, where=where, schedule_state=SCHEDULE_STATE)
        rows = conn.execute(query, (*READY_PHASES, *args))
        summaries = []
        for row in rows.fetchall():
            (ns, name, kind, wanted, ttl, finished, status, created, state) = row[:9]
            if state != "done" and not _supervisor_alive(row[9:12], created, moment):
                return None  # the full read heals it
            if finished and state == "done" and ttl is not None and _expired(status, ttl, moment):
                return None  # the full read has the core delete it
            wire = _status(status)
            if wire is None:
                return None  # the full read reports the damaged record
            suspend, present, ready, restarts = row[12:16]
            summary = JobSummary(
                ns,
                name,
                kind,
                phase_of(wire, finished=bool(finished)),
                ready,
                max(wanted, present),
                restarts,
                created,
                _endpoint(wire),
                progress=progress_of(wire),
                finished=bool(finished),
            )
            if SCHEDULE_STATE in wire:
                schedule = _as_schedule(summary, wire, suspended=bool(suspend))
                if schedule is None:
                    return None  # a time it cannot read: the full read says what is wrong
                summary = schedule
            summaries.append(summary)
        return summaries
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def _supervisor_alive(recorded: tuple[Any, ...], created: float, now: float) -> bool:
    pid, start, boot = recorded
    if pid is None or start is None:
        # Submitted, supervisor not recorded yet: the submitter has some time.
        return now - created < SUPERVISOR_START_GRACE
    return procinfo.is_alive(procinfo.ProcessId(pid=pid, start_ticks=start, boot_id=boot or ""))


def _status(status: str) -> Mapping[str, Any] | None:
    """The stored status in its wire form, None if it is not a JSON object."""
    try:
        wire = json.loads(status)
    except ValueError:
        return None
    return wire if isinstance(wire, Mapping) else None


def _endpoint(wire: Mapping[str, Any]) -> str:
    """A service cluster's ``status.endpoint`` ("" for none)."""
    endpoint = wire.get("endpoint")
    return endpoint if isinstance(endpoint, str) else ""


def _as_schedule(
    summary: JobSummary, wire: Mapping[str, Any], *, suspended: bool
) -> JobSummary | None:
    """A schedule's row: its schedule state and its last run."""
    last = wire.get("lastRun")
    try:
        last_run = None if last is None else datetime.fromisoformat(str(last)).timestamp()
    except ValueError:
        return None
    return replace(
        summary,
        phase=schedule_phase(str(wire.get(SCHEDULE_STATE) or ""), suspended=suspended),
        schedule=True,
        last_run=last_run,
        last_run_name=str(wire.get("lastRunName") or ""),
    )


def _expired(status: str, ttl: float, now: float) -> bool:
    """Whether the TTL may have passed (the core decides): when in doubt, say so."""
    try:
        completed = json.loads(status).get("completionTime")
        finished_at = datetime.fromisoformat(completed).timestamp()
    except (ValueError, TypeError, AttributeError):
        return True
    return now >= finished_at + ttl


__all__ = [
    "DB_NAME",
    "SCHEDULE_STATE",
    "SCHEMA_VERSION",
    "STATE_DIR_ENV",
    "SUSPENDED",
    "JobSummary",
    "default_state_dir",
    "phase_of",
    "read_summaries",
    "schedule_phase",
]
