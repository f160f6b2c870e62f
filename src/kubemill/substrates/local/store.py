"""The local substrate's state: one SQLite database under the user's state directory.

Layout of the state directory (``$KUBEMILL_STATE_DIR``, else
``$XDG_STATE_HOME/kubemill``, else ``~/.local/state/kubemill``)::

    kubemill.db                     jobs, replicas, reserved ports, events
    jobs/<namespace>/<name>-<uid8>/
        logs/<replica>.log          stdout+stderr of every incarnation of the replica
        files/                      files the Plan delivers
        supervisor.log              a detached supervisor's own output (tracebacks)

Several processes use the database at once (a detached supervisor writes, CLI commands
in other shells read and heal), so it runs in WAL mode with a busy timeout, and every
write is a short ``BEGIN IMMEDIATE`` transaction. Each thread gets its own connection.

A database that cannot be used is a :class:`BrokenState` error naming the file and what
to do, never a raw ``sqlite3`` error: a damaged file (``kubemill doctor`` checks it with
SQLite's integrity check; ``kubemill doctor --repair`` moves it aside and starts a fresh
one, leaving every job's logs where they are), or a directory kubemill may not write.

Replica logs are written by the kernel straight into the log files (the process's
stdout and stderr *are* the file), never copied by the supervisor, so nothing is lost
when a supervisor dies; SQLite only records where they are.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from kubemill.api import Job
from kubemill.kinds import load_one
from kubemill.substrates.base import JobExists, JobNotFound, SubstrateError
from kubemill.substrates.local.procinfo import ProcessId
from kubemill.substrates.local.summary import (
    BUSY_TIMEOUT_MS,
    DB_NAME,
    SCHEMA_VERSION,
    STATE_DIR_ENV,
    default_state_dir,
)

_SCHEMA = """
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

_TO_2 = """
ALTER TABLE jobs ADD COLUMN wanted INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN ttl REAL;
"""
"""Schema 1 to 2: what ``kubemill get`` lists, beside the manifest (see :mod:`.summary`)."""


@dataclass(frozen=True)
class JobRecord:
    """One row of ``jobs``."""

    uid: str
    namespace: str
    name: str
    kind: str
    manifest: dict[str, Any]
    status: dict[str, Any]
    finished: bool
    base_dir: str
    job_dir: str
    environments: dict[str, dict[str, str]]
    """Image name -> environment (``Environment.to_json``), resolved once at submit."""
    created: float
    supervisor: ProcessId | None
    supervisor_mode: str
    """``foreground`` (inside the submitting process) or ``detached``."""
    supervisor_state: str
    """``starting``, ``running`` or ``done`` (the supervisor has let go of the job)."""
    request: str | None
    """``delete`` when someone asked the supervisor to stop the job and let go of it,
    ``force`` when an interrupt is to skip the replicas' grace period."""

    def load_job(self) -> Job:
        """The job model, with its recorded status."""
        job = load_one(self.manifest, name=f"{self.namespace}/{self.name}")
        job.status = type(job.status).model_validate(self.status)
        return job

    @property
    def logs_dir(self) -> Path:
        return Path(self.job_dir) / "logs"

    @property
    def files_dir(self) -> Path:
        return Path(self.job_dir) / "files"


@dataclass(frozen=True)
class ReplicaRecord:
    """One row of ``replicas``: the last known state of one replica's process."""

    job_uid: str
    name: str
    replica_type: str
    index: int
    position: int
    log_path: str
    phase: str = "Pending"
    process: ProcessId | None = None
    """The current (or last) incarnation; its pid is also its process group id."""
    exit_code: int | None = None
    restart_count: int = 0
    """In-place restarts of the current incarnation (pod restartPolicy OnFailure/Always)."""
    retired_restarts: int = 0
    """Restarts of earlier incarnations: each recreation (the replica started afresh after
    being deleted, e.g. under the ExitCode policy) counts 1 plus the in-place restarts that
    incarnation had."""
    created: float | None = None
    started: float | None = None
    finished: float | None = None
    reason: str = ""
    message: str = ""
    address: str = ""


@dataclass(frozen=True)
class EventRow:
    """One row of ``events``."""

    time: float
    first_time: float
    type: str
    reason: str
    message: str
    count: int = 1


@dataclass
class NewJob:
    """Everything :meth:`Store.insert_job` records for a new job in one transaction."""

    uid: str
    namespace: str
    name: str
    kind: str
    manifest: dict[str, Any]
    status: dict[str, Any]
    base_dir: str
    job_dir: str
    environments: dict[str, dict[str, str]]
    replicas: list[ReplicaRecord]
    ports: dict[tuple[str, int], int]
    """(replica name, container port) -> host port."""
    supervisor: ProcessId | None = None
    supervisor_mode: str = "foreground"
    created: float = field(default_factory=time.time)
    wanted: int = 0
    """The replicas the spec asks for (what ``kubemill get`` shows as the total)."""
    ttl: float | None = None
    """``runPolicy.ttlSecondsAfterFinished``."""


class PortConflict(SubstrateError):
    """A port chosen for a job was reserved by another job in the meantime (retry)."""


class BrokenState(SubstrateError):
    """The state database cannot be used: damaged, unreadable or not writable."""


_P = ParamSpec("_P")
_R = TypeVar("_R")

_DAMAGED = ("not a database", "malformed", "disk image", "corrupt", "unsupported file format")
_NOT_WRITABLE = ("unable to open", "readonly", "read-only", "permission")


def state_error(exc: sqlite3.Error, path: Path) -> BrokenState:
    """The one-line error for a failure of the database at ``path``: what and what to do."""
    text = str(exc)
    lowered = text.lower()
    if any(word in lowered for word in _DAMAGED):
        return BrokenState(
            f"the state database {path} is damaged ({text}); run `kubemill doctor --repair`"
            " to move it aside and start a fresh one (job logs are kept)"
        )
    if any(word in lowered for word in _NOT_WRITABLE):
        return BrokenState(
            f"cannot open the state database {path} for writing ({text}); make"
            f" {path.parent} writable, or set {STATE_DIR_ENV} to a writable directory"
        )
    if "disk i/o" in lowered:
        return BrokenState(
            f"could not read or write the state database {path} ({text}); check the disk"
            f" holding {path.parent} and its free space, then run `kubemill doctor`"
        )
    if "locked" in lowered or "busy" in lowered:
        return BrokenState(
            f"the state database {path} stayed locked by another kubemill process for"
            f" {BUSY_TIMEOUT_MS // 1000} s ({text}); try again"
        )
    return BrokenState(f"the state database {path} failed: {text}; check it with `kubemill doctor`")


def _translated(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """Raise :class:`BrokenState` instead of a raw ``sqlite3`` error from a Store method."""

    @functools.wraps(method)
    def guarded(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(*args, **kwargs)
        except sqlite3.Error as exc:
            store = args[0]
            assert isinstance(store, Store)
            raise state_error(exc, store.path) from exc

    return guarded


class Store:
    """The SQLite database of one state directory."""

    def __init__(self, state_dir: str | os.PathLike[str] | None = None) -> None:
        self.state_dir = default_state_dir(state_dir)
        self.path = self.state_dir / DB_NAME
        self._local = threading.local()
        try:
            # Private: job manifests, delivered secrets and logs live under it.
            self.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise BrokenState(
                f"cannot create the state directory {self.state_dir}: {exc.strerror}; "
                f"set {STATE_DIR_ENV} to a writable directory"
            ) from exc
        if self.path.exists() and not self.path.is_file():
            raise BrokenState(
                f"the state database {self.path} is not a file; move it away, or set"
                f" {STATE_DIR_ENV} to another directory"
            )
        self._migrate()

    # --- connections -------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            try:
                conn.row_factory = sqlite3.Row
                conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                conn.execute("PRAGMA foreign_keys = ON")
                conn.execute("PRAGMA synchronous = NORMAL")
            except sqlite3.Error:
                conn.close()
                raise
            self._local.conn = conn
        return conn

    def close(self) -> None:
        """Close this thread's connection (others close when their thread ends)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """A short write transaction, taken up front so two writers never deadlock."""
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @_translated
    def _migrate(self) -> None:
        conn = self._connection()
        # WAL lets readers (other shells) proceed while a supervisor writes.
        conn.execute("PRAGMA journal_mode = WAL")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise SubstrateError(
                f"{self.path} was written by a newer kubemill (schema {version}); "
                f"upgrade kubemill or use another state directory ({STATE_DIR_ENV})"
            )
        if version < SCHEMA_VERSION:
            with self._write() as tx:
                # Read again inside the write lock: another process may have just done it.
                version = tx.execute("PRAGMA user_version").fetchone()[0]
                if version == 0:
                    _script(tx, _SCHEMA)
                elif version == 1:
                    _script(tx, _TO_2)
                    _fill_summaries(tx)
                tx.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    # --- jobs --------------------------------------------------------------------------

    @_translated
    def insert_job(self, new: NewJob) -> None:
        """Record a job, its replicas and its reserved ports, or raise.

        :class:`JobExists` if the name is taken; :class:`PortConflict` if a port was
        reserved by another unfinished job since it was chosen (the caller picks again).
        """
        with self._write() as tx:
            row = tx.execute(
                "SELECT status FROM jobs WHERE namespace = ? AND name = ?",
                (new.namespace, new.name),
            ).fetchone()
            if row is not None:
                raise JobExists(_exists_message(new.namespace, new.name, row["status"]))
            taken = _reserved_ports(tx) & set(new.ports.values())
            if taken:
                raise PortConflict(f"ports {sorted(taken)} were reserved by another job")
            sup = new.supervisor
            tx.execute(
                "INSERT INTO jobs (uid, namespace, name, kind, manifest, status, base_dir,"
                " job_dir, environments, created, supervisor_pid, supervisor_start,"
                " supervisor_boot, supervisor_mode, wanted, ttl)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    new.uid,
                    new.namespace,
                    new.name,
                    new.kind,
                    json.dumps(new.manifest),
                    json.dumps(new.status),
                    new.base_dir,
                    new.job_dir,
                    json.dumps(new.environments),
                    new.created,
                    sup.pid if sup else None,
                    sup.start_ticks if sup else None,
                    sup.boot_id if sup else None,
                    new.supervisor_mode,
                    new.wanted,
                    new.ttl,
                ),
            )
            for rep in new.replicas:
                _upsert_replica(tx, rep)
            tx.executemany(
                "INSERT INTO ports (job_uid, replica, container_port, port) VALUES (?,?,?,?)",
                [(new.uid, r, cp, p) for (r, cp), p in new.ports.items()],
            )

    @_translated
    def job(self, namespace: str, name: str) -> JobRecord:
        """The job of that name; :class:`JobNotFound` if there is none."""
        row = (
            self._connection()
            .execute("SELECT * FROM jobs WHERE namespace = ? AND name = ?", (namespace, name))
            .fetchone()
        )
        if row is None:
            raise JobNotFound(f"no job {name!r} in namespace {namespace!r}")
        return _job(row)

    @_translated
    def job_by_uid(self, uid: str) -> JobRecord | None:
        """The job with this uid, or ``None`` once it has been deleted."""
        row = self._connection().execute("SELECT * FROM jobs WHERE uid = ?", (uid,)).fetchone()
        return None if row is None else _job(row)

    @_translated
    def jobs(self, namespace: str | None = None) -> list[JobRecord]:
        """All jobs (of one namespace), oldest first."""
        conn = self._connection()
        if namespace is None:
            rows = conn.execute("SELECT * FROM jobs ORDER BY created, name").fetchall()
        else:
            rows = conn.execute(
                "SELECT * FROM jobs WHERE namespace = ? ORDER BY created, name", (namespace,)
            ).fetchall()
        return [_job(r) for r in rows]

    @_translated
    def set_status(self, uid: str, status: Mapping[str, Any], *, finished: bool) -> None:
        """Record the job's status (the supervisor calls this only when it changed)."""
        with self._write() as tx:
            tx.execute(
                "UPDATE jobs SET status = ?, finished = ? WHERE uid = ?",
                (json.dumps(status), int(finished), uid),
            )

    @_translated
    def settle_without_supervisor(
        self, uid: str, status: Mapping[str, Any], *, finished: bool, supervisor_done: bool
    ) -> bool:
        """Record the core's verdict on a job that no supervisor runs, once.

        ``supervisor_done`` says what the caller read: False when it found the supervisor
        lost (this call marks it ``done``), True when it was already ``done`` (a suspended
        job). Writes nothing if another process changed that meanwhile or the job has
        finished; True if this call recorded the status.
        """
        with self._write() as tx:
            cur = tx.execute(
                "UPDATE jobs SET status = ?, finished = ?, supervisor_state = 'done'"
                " WHERE uid = ? AND finished = 0 AND (supervisor_state = 'done') = ?",
                (json.dumps(status), int(finished), uid, int(supervisor_done)),
            )
            return cur.rowcount == 1

    @_translated
    def claim_supervisor(self, uid: str, process: ProcessId, *, mode: str) -> bool:
        """Record ``process`` as the job's supervisor unless another one holds it."""
        with self._write() as tx:
            cur = tx.execute(
                "UPDATE jobs SET supervisor_pid = ?, supervisor_start = ?, supervisor_boot = ?,"
                " supervisor_mode = ? WHERE uid = ? AND (supervisor_pid IS NULL OR"
                " (supervisor_pid = ? AND supervisor_start = ?))",
                (
                    process.pid,
                    process.start_ticks,
                    process.boot_id,
                    mode,
                    uid,
                    process.pid,
                    process.start_ticks,
                ),
            )
            return cur.rowcount == 1

    @_translated
    def set_supervisor_state(self, uid: str, state: str) -> None:
        """``running`` once supervision began, ``done`` once the supervisor let go."""
        with self._write() as tx:
            tx.execute("UPDATE jobs SET supervisor_state = ? WHERE uid = ?", (state, uid))

    @_translated
    def request(self, uid: str, what: str) -> None:
        """Ask the job's supervisor to ``delete`` it or to ``force`` its stop (delete wins)."""
        with self._write() as tx:
            tx.execute(
                "UPDATE jobs SET request = ? WHERE uid = ? AND"
                " (request IS NULL OR request != 'delete')",
                (what, uid),
            )

    @_translated
    def patch_manifest(
        self,
        uid: str,
        *,
        annotations: Mapping[str, str | None] | None = None,
        suspend: bool | None = None,
    ) -> dict[str, Any] | None:
        """Change the recorded manifest as a merge patch would; the new one (None: no job).

        ``annotations`` sets ``metadata.annotations`` (a ``None`` value removes one);
        ``suspend`` sets ``spec.runPolicy.suspend``. The job's supervisor notices the
        change on its next request check and reconciles it (the core decides what it means).
        """
        with self._write() as tx:
            row = tx.execute("SELECT manifest FROM jobs WHERE uid = ?", (uid,)).fetchone()
            if row is None:
                return None
            manifest: dict[str, Any] = json.loads(row["manifest"])
            if annotations:
                meta = manifest.setdefault("metadata", {})
                current = dict(meta.get("annotations") or {})
                for key, value in annotations.items():
                    if value is None:
                        current.pop(key, None)
                    else:
                        current[key] = value
                meta["annotations"] = current
            if suspend is not None:
                # Each kind says where its suspend field is (Spark's is spec.suspend).
                _merge_into(manifest, type(load_one(manifest)).suspend_patch(suspend))
            tx.execute("UPDATE jobs SET manifest = ? WHERE uid = ?", (json.dumps(manifest), uid))
            return manifest

    @_translated
    def manifest(self, uid: str) -> dict[str, Any] | None:
        """The job's recorded manifest as last patched (None once the job is gone)."""
        row = (
            self._connection().execute("SELECT manifest FROM jobs WHERE uid = ?", (uid,)).fetchone()
        )
        return None if row is None else dict(json.loads(row["manifest"]))

    @_translated
    def hand_over(self, uid: str, process: ProcessId) -> bool:
        """Give an unfinished job whose supervisor is done to a new detached one (resume).

        True if it took the job; False if it has finished or has a supervisor again.
        """
        with self._write() as tx:
            cur = tx.execute(
                "UPDATE jobs SET supervisor_pid = ?, supervisor_start = ?, supervisor_boot = ?,"
                " supervisor_mode = 'detached', supervisor_state = 'starting', request = NULL"
                " WHERE uid = ? AND finished = 0 AND supervisor_state = 'done'",
                (process.pid, process.start_ticks, process.boot_id, uid),
            )
            return cur.rowcount == 1

    @_translated
    def pending_request(self, uid: str) -> str | None:
        """What was asked of the supervisor; ``delete`` also when the job row is gone."""
        row = (
            self._connection().execute("SELECT request FROM jobs WHERE uid = ?", (uid,)).fetchone()
        )
        return "delete" if row is None else row["request"]

    @_translated
    def remove_job(self, uid: str) -> None:
        """Forget the job: its row, replicas, ports and events (logs are the caller's)."""
        with self._write() as tx:
            tx.execute("DELETE FROM jobs WHERE uid = ?", (uid,))

    # --- replicas ----------------------------------------------------------------------

    @_translated
    def replicas(self, uid: str) -> list[ReplicaRecord]:
        """The job's replicas in plan order."""
        rows = (
            self._connection()
            .execute("SELECT * FROM replicas WHERE job_uid = ? ORDER BY position", (uid,))
            .fetchall()
        )
        return [_replica(r) for r in rows]

    @_translated
    def save_replicas(self, records: list[ReplicaRecord]) -> None:
        """Write the replicas' rows (the supervisor writes only those that changed)."""
        if not records:
            return
        with self._write() as tx:
            for rec in records:
                _upsert_replica(tx, rec)

    # --- ports -------------------------------------------------------------------------

    @_translated
    def ports(self, uid: str) -> dict[tuple[str, int], int]:
        """The job's reserved ports: (replica, container port) -> host port."""
        rows = (
            self._connection()
            .execute("SELECT replica, container_port, port FROM ports WHERE job_uid = ?", (uid,))
            .fetchall()
        )
        return {(r["replica"], r["container_port"]): r["port"] for r in rows}

    @_translated
    def reserved_ports(self) -> set[int]:
        """Ports held by jobs that have not finished."""
        return _reserved_ports(self._connection())

    @_translated
    def replace_ports(self, uid: str, ports: Mapping[tuple[str, int], int]) -> None:
        """Swap some of a job's ports (re-allocation before its first start)."""
        with self._write() as tx:
            taken = _reserved_ports(tx) - set(self.ports(uid).values())
            clash = taken & set(ports.values())
            if clash:
                raise PortConflict(f"ports {sorted(clash)} were reserved by another job")
            tx.executemany(
                "UPDATE ports SET port = ? WHERE job_uid = ? AND replica = ? AND"
                " container_port = ?",
                [(p, uid, r, cp) for (r, cp), p in ports.items()],
            )

    # --- events ------------------------------------------------------------------------

    @_translated
    def add_event(
        self, uid: str, *, type: str, reason: str, message: str, when: float | None = None
    ) -> None:
        """Record an event; a repeat of the job's last event bumps its count instead."""
        now = time.time() if when is None else when
        with self._write() as tx:
            last = tx.execute(
                "SELECT id, type, reason, message FROM events WHERE job_uid = ?"
                " ORDER BY id DESC LIMIT 1",
                (uid,),
            ).fetchone()
            if last is not None and (last["type"], last["reason"], last["message"]) == (
                type,
                reason,
                message,
            ):
                tx.execute(
                    "UPDATE events SET count = count + 1, time = ? WHERE id = ?", (now, last["id"])
                )
                return
            tx.execute(
                "INSERT INTO events (job_uid, first_time, time, type, reason, message)"
                " VALUES (?,?,?,?,?,?)",
                (uid, now, now, type, reason, message),
            )

    @_translated
    def events(self, uid: str) -> list[EventRow]:
        """The job's events, oldest first."""
        rows = (
            self._connection()
            .execute("SELECT * FROM events WHERE job_uid = ? ORDER BY id", (uid,))
            .fetchall()
        )
        return [
            EventRow(
                time=r["time"],
                first_time=r["first_time"],
                type=r["type"],
                reason=r["reason"],
                message=r["message"],
                count=r["count"],
            )
            for r in rows
        ]


# --- checking and repairing ---------------------------------------------------------------


@dataclass(frozen=True)
class StateCheck:
    """What ``kubemill doctor`` found in a state directory."""

    path: Path
    """The database checked."""
    exists: bool
    problems: list[str]
    """SQLite's integrity check (``PRAGMA integrity_check``) findings, or why it could not
    run; empty when the database is sound."""

    @property
    def healthy(self) -> bool:
        return not self.problems


def check_state(state_dir: str | os.PathLike[str] | None = None) -> StateCheck:
    """Run SQLite's integrity check on the state database (creates nothing).

    Raises :class:`BrokenState` if the state directory is not a directory at all.
    """
    directory = default_state_dir(state_dir)
    path = directory / DB_NAME
    if directory.exists() and not directory.is_dir():
        raise BrokenState(
            f"the state directory {directory} is not a directory; move it away, or set"
            f" {STATE_DIR_ENV} to another directory"
        )
    if not path.exists():
        return StateCheck(path, exists=False, problems=[])
    if not path.is_file():
        return StateCheck(path, exists=True, problems=["it is not a file"])
    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    except sqlite3.Error as exc:
        return StateCheck(path, exists=True, problems=[str(exc)])
    try:
        rows = conn.execute("PRAGMA integrity_check").fetchall()
        problems = [str(r[0]) for r in rows if r[0] != "ok"]
        if not problems:
            # A sound file that is not kubemill's (or from a newer one) is a problem too.
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                problems = [f"written by a newer kubemill (schema {version})"]
    except sqlite3.Error as exc:
        problems = [str(exc)]
    finally:
        conn.close()
    return StateCheck(path, exists=True, problems=problems)


def repair_state(state_dir: str | os.PathLike[str] | None = None) -> Path:
    """Move the state database aside and start a fresh one; where the old one went.

    The old file (with its ``-wal`` and ``-shm`` companions) keeps its contents for a
    later look; job directories and their logs are not touched. Jobs recorded only in the
    old database are forgotten: their supervisors, finding their job gone, stop it.
    """
    directory = default_state_dir(state_dir)
    path = directory / DB_NAME
    stamp = time.strftime("%Y%m%dT%H%M%S")
    aside = directory / f"{DB_NAME}.broken-{stamp}"
    suffix = 1
    while aside.exists():
        suffix += 1
        aside = directory / f"{DB_NAME}.broken-{stamp}-{suffix}"
    try:
        for companion in ("", "-wal", "-shm"):
            source = directory / f"{DB_NAME}{companion}"
            if source.exists():
                source.rename(directory / f"{aside.name}{companion}")
    except OSError as exc:
        raise BrokenState(
            f"cannot move {path} aside: {exc.strerror}; make {directory} writable"
        ) from exc
    Store(directory).close()
    return aside


# --- schema ----------------------------------------------------------------------------------


def _script(conn: sqlite3.Connection, script: str) -> None:
    """Run ``;``-separated statements inside the caller's transaction (``executescript``
    would commit it first)."""
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


def _fill_summaries(conn: sqlite3.Connection) -> None:
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


# --- row mapping ---------------------------------------------------------------------------


def _exists_message(namespace: str, name: str, status_json: str) -> str:
    phase = "Pending"
    try:
        conditions = json.loads(status_json).get("conditions", [])
        true_ones = [c["type"] for c in conditions if c.get("status") == "True"]
        for terminal in ("Failed", "Succeeded"):
            if terminal in true_ones:
                true_ones = [terminal]
        if true_ones:
            phase = true_ones[-1]
    except (ValueError, AttributeError, KeyError, TypeError):
        pass
    return (
        f"job {name!r} already exists in namespace {namespace!r} ({phase}); "
        f"delete it first (`kubemill delete {name}`) or give the new one another name"
    )


def _reserved_ports(conn: sqlite3.Connection) -> set[int]:
    rows = conn.execute(
        "SELECT ports.port FROM ports JOIN jobs ON jobs.uid = ports.job_uid WHERE jobs.finished = 0"
    ).fetchall()
    return {r[0] for r in rows}


def _process(pid: int | None, start: int | None, boot: str | None) -> ProcessId | None:
    if pid is None or start is None:
        return None
    return ProcessId(pid=pid, start_ticks=start, boot_id=boot or "")


def _job(row: sqlite3.Row) -> JobRecord:
    return JobRecord(
        uid=row["uid"],
        namespace=row["namespace"],
        name=row["name"],
        kind=row["kind"],
        manifest=json.loads(row["manifest"]),
        status=json.loads(row["status"]),
        finished=bool(row["finished"]),
        base_dir=row["base_dir"],
        job_dir=row["job_dir"],
        environments=json.loads(row["environments"]),
        created=row["created"],
        supervisor=_process(row["supervisor_pid"], row["supervisor_start"], row["supervisor_boot"]),
        supervisor_mode=row["supervisor_mode"],
        supervisor_state=row["supervisor_state"],
        request=row["request"],
    )


def _replica(row: sqlite3.Row) -> ReplicaRecord:
    return ReplicaRecord(
        job_uid=row["job_uid"],
        name=row["name"],
        replica_type=row["replica_type"],
        index=row["idx"],
        position=row["position"],
        log_path=row["log_path"],
        phase=row["phase"],
        process=_process(row["pid"], row["proc_start"], row["proc_boot"]),
        exit_code=row["exit_code"],
        restart_count=row["restart_count"],
        retired_restarts=row["retired_restarts"],
        created=row["created"],
        started=row["started"],
        finished=row["finished"],
        reason=row["reason"],
        message=row["message"],
        address=row["address"],
    )


def _upsert_replica(conn: sqlite3.Connection, rec: ReplicaRecord) -> None:
    proc = rec.process
    conn.execute(
        "INSERT INTO replicas (job_uid, name, replica_type, idx, position, phase, pid, pgid,"
        " proc_start, proc_boot, exit_code, restart_count, retired_restarts, created, started,"
        " finished, reason, message, address, log_path)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
        " ON CONFLICT (job_uid, name) DO UPDATE SET phase = excluded.phase,"
        " pid = excluded.pid, pgid = excluded.pgid, proc_start = excluded.proc_start,"
        " proc_boot = excluded.proc_boot, exit_code = excluded.exit_code,"
        " restart_count = excluded.restart_count, retired_restarts = excluded.retired_restarts,"
        " created = excluded.created, started = excluded.started,"
        " finished = excluded.finished, reason = excluded.reason,"
        " message = excluded.message, address = excluded.address",
        (
            rec.job_uid,
            rec.name,
            rec.replica_type,
            rec.index,
            rec.position,
            rec.phase,
            proc.pid if proc else None,
            proc.pid if proc else None,
            proc.start_ticks if proc else None,
            proc.boot_id if proc else None,
            rec.exit_code,
            rec.restart_count,
            rec.retired_restarts,
            rec.created,
            rec.started,
            rec.finished,
            rec.reason,
            rec.message,
            rec.address,
            rec.log_path,
        ),
    )


def _merge_into(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """Apply a JSON merge patch of nested mappings to ``target`` in place (no deletions)."""
    for key, value in patch.items():
        if isinstance(value, Mapping) and isinstance(target.get(key), dict):
            _merge_into(target[key], value)
        elif isinstance(value, Mapping):
            target[key] = {}
            _merge_into(target[key], value)
        else:
            target[key] = value


__all__ = [
    "DB_NAME",
    "STATE_DIR_ENV",
    "BrokenState",
    "EventRow",
    "JobRecord",
    "NewJob",
    "PortConflict",
    "ReplicaRecord",
    "StateCheck",
    "Store",
    "check_state",
    "default_state_dir",
    "listing_fields",
    "repair_state",
    "state_error",
]
