"""The local state database's schema: its tables, the steps from older versions, and what a
job's row holds for ``kubemill get`` beside its manifest (:func:`listing_fields`).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3

from kubemill.api import Job
from kubemill.kinds import load_one

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
"""Schema 1 to 2: what ``kubemill get`` lists, beside the manifest (see :mod:`.summary`)."""


def run_script(conn: sqlite3.Connection, script: str) -> None:
    """Run ``;``-separated statements inside the caller's transaction (``executescript``
    would commit it first)."""
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


def fill_summaries(conn: sqlite3.Connection) -> None:
    """Give the jobs of a schema-1 database what ``kubemill get`` lists (schema 2)."""
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
