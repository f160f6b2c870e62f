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
``replicas`` rows in the same query.

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
from dataclasses import dataclass
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


def phase_of(status: Mapping[str, Any]) -> str:
    """The phase of a job status in its wire form, as ``JobStatus.phase`` words it: the
    last True condition (Failed, then Succeeded, win), else ``Pending``; for a kind with
    an application state (Spark's ``applicationState``), that state, as its status words
    it (unless the conditions say it finished and the state does not)."""
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
    return true_ones[-1] if true_ones else "Pending"


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


_QUERY = """
SELECT jobs.namespace, jobs.name, jobs.kind, jobs.wanted, jobs.ttl,
       jobs.finished, jobs.status, jobs.created, jobs.supervisor_state, jobs.supervisor_pid,
       jobs.supervisor_start, jobs.supervisor_boot,
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
        rows = conn.execute(_QUERY.format(ready=marks, where=where), (*READY_PHASES, *args))
        summaries = []
        for row in rows.fetchall():
            (ns, name, kind, wanted, ttl, finished, status, created, state) = row[:9]
            if state != "done" and not _supervisor_alive(row[9:12], created, moment):
                return None  # the full read heals it
            if finished and state == "done" and ttl is not None and _expired(status, ttl, moment):
                return None  # the full read has the core delete it
            phase = _phase(status)
            if phase is None:
                return None  # the full read reports the damaged record
            present, ready, restarts = row[12:15]
            summaries.append(
                JobSummary(
                    ns,
                    name,
                    kind,
                    phase,
                    ready,
                    max(wanted, present),
                    restarts,
                    created,
                    _endpoint(status),
                )
            )
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


def _phase(status: str) -> str | None:
    try:
        wire = json.loads(status)
    except ValueError:
        return None
    return phase_of(wire) if isinstance(wire, Mapping) else None


def _endpoint(status: str) -> str:
    """A service cluster's ``status.endpoint`` ("" for none; the status parsed before)."""
    endpoint = json.loads(status).get("endpoint")
    return endpoint if isinstance(endpoint, str) else ""


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
    "SCHEMA_VERSION",
    "STATE_DIR_ENV",
    "JobSummary",
    "default_state_dir",
    "phase_of",
    "read_summaries",
]
