"""The local state database: where it lives, its schema (its tables, the steps from older
versions, what a job's row holds for ``kubemill get`` beside its manifest,
:func:`listing_fields`), and the query a job list reads it with (:data:`LISTING_QUERY`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from kubemill.substrates.errors import SubstrateError

if TYPE_CHECKING:
    from kubemill.api import Job

STATE_DIR_ENV = "KUBEMILL_STATE_DIR"
DB_NAME = "kubemill.db"
SCHEMA_VERSION = 2
"""1: the first schema; 2: ``jobs.wanted`` and ``jobs.ttl`` for listing."""
BUSY_TIMEOUT_MS = 10_000


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


DEFAULT_NAMESPACE = "default"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def checked_namespace(namespace: str | None) -> str:
    """The namespace to use (``default`` when none is given); every method that takes one
    checks it here, so a name such as ``../..`` is refused the same way everywhere."""
    if not namespace:
        return DEFAULT_NAMESPACE
    if not _DNS_LABEL.match(namespace):
        raise SubstrateError(
            f"namespace {namespace!r} is not a valid name; use lowercase letters,"
            " digits and '-', starting and ending with a letter or digit"
        )
    return namespace


LISTING_QUERY = """
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
"""One row per job with what its row in a job list needs (:func:`~.records.job_summary`):
the job's columns, ready replicas and restarts counted from ``replicas`` in the same query,
and a schedule's ``spec.suspend`` (read for schedules only)."""


SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    uid TEXT PRIMARY KEY,
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    manifest TEXT NOT NULL,
    status TEXT NOT NULL,
    finished INTEGER NOT NULL DEFAULT 0,
    base_dir TEXT NOT NULL,
    job_dir TEXT NOT NULL,
    environments TEXT NOT NULL DEFAULT '{}',
    created REAL NOT NULL,
    supervisor_pid INTEGER,
    supervisor_start INTEGER,
    supervisor_boot TEXT,
    supervisor_mode TEXT NOT NULL DEFAULT 'foreground',
    supervisor_state TEXT NOT NULL DEFAULT 'starting',
    request TEXT,
    wanted INTEGER NOT NULL DEFAULT 0,
    ttl REAL,
    UNIQUE (namespace, name)
);
CREATE TABLE IF NOT EXISTS replicas (
    job_uid TEXT NOT NULL REFERENCES jobs(uid) ON DELETE CASCADE,
    name TEXT NOT NULL,
    replica_type TEXT NOT NULL,
    idx INTEGER NOT NULL,
    position INTEGER NOT NULL,
    phase TEXT NOT NULL DEFAULT 'Pending',
    pid INTEGER,
    pgid INTEGER,
    proc_start INTEGER,
    proc_boot TEXT,
    exit_code INTEGER,
    restart_count INTEGER NOT NULL DEFAULT 0,
    retired_restarts INTEGER NOT NULL DEFAULT 0,
    created REAL,
    started REAL,
    finished REAL,
    reason TEXT NOT NULL DEFAULT '',
    message TEXT NOT NULL DEFAULT '',
    address TEXT NOT NULL DEFAULT '',
    log_path TEXT NOT NULL,
    PRIMARY KEY (job_uid, name)
);
CREATE TABLE IF NOT EXISTS ports (
    job_uid TEXT NOT NULL REFERENCES jobs(uid) ON DELETE CASCADE,
    replica TEXT NOT NULL,
    container_port INTEGER NOT NULL,
    port INTEGER NOT NULL,
    PRIMARY KEY (job_uid, replica, container_port)
);
CREATE INDEX IF NOT EXISTS ports_by_port ON ports (port);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_uid TEXT NOT NULL REFERENCES jobs(uid) ON DELETE CASCADE,
    first_time REAL NOT NULL,
    time REAL NOT NULL,
    type TEXT NOT NULL,
    reason TEXT NOT NULL,
    message TEXT NOT NULL,
    count INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS events_by_job ON events (job_uid, id);
"""

TO_2 = """
ALTER TABLE jobs ADD COLUMN wanted INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN ttl REAL;
"""
"""Schema 1 to 2: what ``kubemill get`` lists, beside the manifest (see
:meth:`.store.Store.summaries`)."""


def run_script(conn: sqlite3.Connection, script: str) -> None:
    """Run ``;``-separated statements inside the caller's transaction (``executescript``
    would commit it first)."""
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


def fill_summaries(conn: sqlite3.Connection) -> None:
    """Give the jobs of a schema-1 database what ``kubemill get`` lists (schema 2)."""
    # Imported here: the schema is read by every command, the models only by a migration.
    from kubemill.kinds import load_one

    rows = conn.execute("SELECT uid, namespace, name, manifest FROM jobs").fetchall()
    for row in rows:
        wanted, ttl = 0, None
        # A record no model loads (a damaged manifest) is still listed, with what it has.
        with contextlib.suppress(Exception):
            job = load_one(json.loads(row["manifest"]), name=f"{row['namespace']}/{row['name']}")
            wanted, ttl = _wanted(job), _ttl(job)
        conn.execute("UPDATE jobs SET wanted = ?, ttl = ? WHERE uid = ?", (wanted, ttl, row["uid"]))


def _wanted(job: Job) -> int:
    return sum(job.replica_count(rtype) for rtype in job.replica_specs)


def _ttl(job: Job) -> float | None:
    ttl = job.run_policy.ttl_seconds_after_finished
    return None if ttl is None else float(ttl)


def listing_fields(job: Job) -> tuple[int, float | None]:
    """``NewJob.wanted`` and ``NewJob.ttl`` of a job."""
    return _wanted(job), _ttl(job)
