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

import functools
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from kubemill.substrates.errors import JobExists, JobNotFound, SubstrateError
from kubemill.substrates.local.procinfo import ProcessId
from kubemill.substrates.local.records import (
    READY_PHASES,
    EventRow,
    JobRecord,
    NewJob,
    ReplicaRecord,
    apply_patch,
    exists_message,
    job_record,
    merge_into,
    replica_record,
    reserved_ports_in,
    upsert_replica,
)
from kubemill.substrates.local.state_errors import BrokenState, state_error
from kubemill.substrates.local.state_schema import (
    BUSY_TIMEOUT_MS,
    DB_NAME,
    LISTING_QUERY,
    SCHEMA,
    SCHEMA_VERSION,
    STATE_DIR_ENV,
    TO_2,
    checked_namespace,
    default_state_dir,
    fill_summaries,
    listing_fields,
    run_script,
)
from kubemill.substrates.local.store_reads import TableReads

if TYPE_CHECKING:
    from kubemill.substrates.rows import JobSummary


class PortConflict(SubstrateError):
    """A port chosen for a job was reserved by another job in the meantime (retry)."""


_P = ParamSpec("_P")
_R = TypeVar("_R")


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
        # Listings decode only rows that changed since they were last read (store_reads).
        self._job_reads = TableReads(lambda row: str(row["uid"]), job_record)
        self._replica_reads = TableReads(lambda r: (str(r["job_uid"]), r["name"]), replica_record)
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
                    run_script(tx, SCHEMA)
                elif version == 1:
                    run_script(tx, TO_2)
                    fill_summaries(tx)
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
                raise JobExists(exists_message(new.namespace, new.name, row["status"]))
            taken = reserved_ports_in(tx) & set(new.ports.values())
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
                upsert_replica(tx, rep)
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
        return job_record(row)

    @_translated
    def job_by_uid(self, uid: str) -> JobRecord | None:
        """The job with this uid, or ``None`` once it has been deleted."""
        row = self._connection().execute("SELECT * FROM jobs WHERE uid = ?", (uid,)).fetchone()
        return None if row is None else job_record(row)

    @_translated
    def jobs(self, namespace: str | None = None) -> list[JobRecord]:
        """All jobs (of one namespace), oldest first; a row unchanged since the last
        listing is the record it gave then, not decoded again (:mod:`.store_reads`)."""
        conn = self._connection()
        if namespace is None:
            return self._job_reads.read(conn, "SELECT * FROM jobs ORDER BY created, name")
        return self._job_reads.read(
            conn,
            "SELECT * FROM jobs WHERE namespace = ? ORDER BY created, name",
            (namespace,),
            listed=lambda rec: rec.namespace == namespace,
        )

    @_translated
    def summaries(
        self, namespace: str | None = None, *, now: float | None = None
    ) -> list[JobSummary] | None:
        """Every job's row of a job list (of ``namespace``), oldest first, from one query
        and without the job models; None when a job needs the core first (a supervisor died,
        a TTL may have passed) or its record cannot be read as it is: then the caller reads
        the jobs whole (:meth:`jobs`), through the core, which heals, deletes or reports."""
        # A listing's own module (and a job list's records), not a submission's.
        from kubemill.substrates.local.listing_rows import SCHEDULE_STATE, job_summary

        moment = time.time() if now is None else now
        namespace = None if namespace is None else checked_namespace(namespace)
        marks = ",".join("?" for _ in READY_PHASES)
        where, args = ("WHERE jobs.namespace = ?", (namespace,)) if namespace else ("", ())
        query = LISTING_QUERY.format(ready=marks, where=where, schedule_state=SCHEDULE_STATE)
        cursor = self._connection().cursor()
        cursor.row_factory = None  # plain tuples, in the query's order
        rows = cursor.execute(query, (*READY_PHASES, *args)).fetchall()
        found = []
        for row in rows:
            summary = job_summary(row, moment)
            if summary is None:
                return None
            found.append(summary)
        return found

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
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    ) -> dict[str, Any] | None:
        """Change the recorded manifest as a patch would; the new one (None: no job).

        ``annotations`` sets ``metadata.annotations`` (a ``None`` value removes one);
        ``suspend`` sets ``spec.runPolicy.suspend``; ``patch`` is merged in (a list replaces
        the list), or applied as a JSON patch (a list of operations;
        :class:`~.records.JsonPatchError`, and nothing changed, if one cannot be applied).
        The job's supervisor notices the change on its next request check and reconciles it
        (the core decides what it means).
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
            from kubemill.kinds import load_one

            if patch:
                apply_patch(manifest, patch)
                wanted, ttl = listing_fields(load_one(manifest))  # what a list shows, as patched
                tx.execute("UPDATE jobs SET wanted = ?, ttl = ? WHERE uid = ?", (wanted, ttl, uid))
            if suspend is not None:
                # Each kind says where its suspend field is (Spark's is spec.suspend).
                merge_into(manifest, type(load_one(manifest)).suspend_patch(suspend))
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
        return [replica_record(r) for r in rows]

    @_translated
    def replicas_of(self, uids: list[str]) -> dict[str, list[ReplicaRecord]]:
        """The replicas of each of these jobs in plan order, in one query (a listing's).

        A job without replicas (a controller, a job deleted meanwhile) maps to ``[]``.
        """
        found: dict[str, list[ReplicaRecord]] = {uid: [] for uid in uids}
        if not uids:
            return found
        # Every job's replicas at once: a table scan is cheaper than a thousand lookups,
        # and rows of jobs not asked for (another namespace) are dropped below.
        every = self._replica_reads.read(
            self._connection(), "SELECT * FROM replicas ORDER BY job_uid, position"
        )
        for record in every:
            records = found.get(record.job_uid)
            if records is not None:
                records.append(record)
        return found

    @_translated
    def save_replicas(self, records: list[ReplicaRecord]) -> None:
        """Write the replicas' rows (the supervisor writes only those that changed)."""
        if not records:
            return
        with self._write() as tx:
            for rec in records:
                upsert_replica(tx, rec)

    @_translated
    def forget_replica(self, uid: str, name: str) -> None:
        """Drop the row of a replica that is gone and no longer in its job's Plan (scaled
        down), as its pod is gone on Kubernetes; its ports stay reserved with the job's."""
        with self._write() as tx:
            tx.execute("DELETE FROM replicas WHERE job_uid = ? AND name = ?", (uid, name))

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
        return reserved_ports_in(self._connection())

    @_translated
    def replace_ports(self, uid: str, ports: Mapping[tuple[str, int], int]) -> None:
        """Swap some of a job's ports (re-allocation before its first start), or add those
        of new replicas (a scale-up)."""
        with self._write() as tx:
            taken = reserved_ports_in(tx) - set(self.ports(uid).values())
            clash = taken & set(ports.values())
            if clash:
                raise PortConflict(f"ports {sorted(clash)} were reserved by another job")
            tx.executemany(
                "INSERT INTO ports (job_uid, replica, container_port, port) VALUES (?,?,?,?)"
                " ON CONFLICT (job_uid, replica, container_port)"
                " DO UPDATE SET port = excluded.port",
                [(uid, r, cp, p) for (r, cp), p in ports.items()],
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


__all__ = [
    "BUSY_TIMEOUT_MS",
    "DB_NAME",
    "LISTING_QUERY",
    "SCHEMA_VERSION",
    "STATE_DIR_ENV",
    "BrokenState",
    "EventRow",
    "JobRecord",
    "NewJob",
    "PortConflict",
    "ReplicaRecord",
    "Store",
    "checked_namespace",
    "default_state_dir",
    "listing_fields",
    "state_error",
]
