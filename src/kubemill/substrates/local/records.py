"""What the local state database holds, as records (a job, a replica, an event, a job to
insert, a job list's row), and their mapping to and from SQLite rows. :class:`~.store.Store`
reads and writes them.

Imported without the job models (they load when a record's job is first loaded), so that a
listing costs one SQL query and no more: a job list's row (:func:`~.listing_rows.job_summary`,
a module apart, which a submission does not load) is read from the stored status in its wire
form, beside ``wanted`` and ``ttl``, which the job's row keeps next to its manifest
(:func:`~.state_schema.listing_fields`).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubemill.substrates.errors import SubstrateError
from kubemill.substrates.local.procinfo import ProcessId

if TYPE_CHECKING:
    from kubemill.api import Job

SUPERVISOR_START_GRACE = 30.0
"""A job recorded this long ago without any supervisor pid has lost its submitter."""
READY_PHASES = ("Running", "Succeeded")
"""A replica counts as ready while it runs and once it has succeeded."""


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
    ttl: float | None = None
    """``runPolicy.ttlSecondsAfterFinished``, kept beside the manifest when it was recorded
    (no patch changes it): a read with ``None`` here knows no TTL can delete the job
    without loading the manifest into its model."""

    def load_job(self) -> Job:
        """The job model, with its recorded status."""
        from kubemill.kinds import load_one

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


# --- row mapping ---------------------------------------------------------------------------


def exists_message(namespace: str, name: str, status_json: str) -> str:
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


def reserved_ports_in(conn: sqlite3.Connection) -> set[int]:
    rows = conn.execute(
        "SELECT ports.port FROM ports JOIN jobs ON jobs.uid = ports.job_uid WHERE jobs.finished = 0"
    ).fetchall()
    return {r[0] for r in rows}


def _process(pid: int | None, start: int | None, boot: str | None) -> ProcessId | None:
    if pid is None or start is None:
        return None
    return ProcessId(pid=pid, start_ticks=start, boot_id=boot or "")


def job_record(row: sqlite3.Row) -> JobRecord:
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
        ttl=row["ttl"],
    )


def replica_record(row: sqlite3.Row) -> ReplicaRecord:
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


def upsert_replica(conn: sqlite3.Connection, rec: ReplicaRecord) -> None:
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


# --- a job list's row ------------------------------------------------------------------------


# The wire form is JSON as ``json.loads`` gives it: ``dict``, whose isinstance check is
# cheaper than an abstract ``Mapping``'s, a thousand times over in a listing.


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
        str(c.get("type")) for c in conditions if isinstance(c, dict) and c.get("status") == "True"
    ]
    application = status.get("applicationState")
    if isinstance(application, dict):
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


def merge_into(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """Apply a JSON merge patch (RFC 7386) to ``target`` in place: a ``null`` removes the
    field, a mapping merges, anything else (a list included) replaces, as the API server
    applies ``application/merge-patch+json`` to a custom resource."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(target.get(key), dict):
            merge_into(target[key], value)
        elif isinstance(value, Mapping):
            target[key] = {}
            merge_into(target[key], value)
        else:
            target[key] = value


class JsonPatchError(SubstrateError):
    """A JSON patch that cannot be applied, so not applied at all: a failed ``test`` (the
    job changed since the patch was made: read it and try again), a path that is not
    there, an operation kubemill does not apply."""


def _pointer(path: str) -> list[str]:
    """The reference tokens of a JSON pointer (RFC 6901)."""
    if not path.startswith("/"):
        raise JsonPatchError(f"{path!r} is not a JSON pointer to a member (it starts with '/')")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _index(items: list[Any], token: str, path: str, *, new: bool = False) -> int:
    """The list index ``token`` names (``new``: where an item is added; ``-`` the end)."""
    if new and token == "-":  # noqa: S105 - the end of a list, not a password
        return len(items)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise JsonPatchError(f"{path}: {token!r} is not an index of the list")
    index = int(token)
    if index > len(items) - (0 if new else 1):
        raise JsonPatchError(f"{path}: the list has no item {index}")
    return index


def _parent(document: Any, path: str) -> tuple[Any, str]:
    """The container ``path`` names a member of, and that member's token."""
    tokens = _pointer(path)
    node = document
    for token in tokens[:-1]:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, path)]
        else:
            raise JsonPatchError(f"{path}: {token!r} is not there")
    return node, tokens[-1]


def _member(parent: Any, token: str, path: str, op: str) -> Any:
    if isinstance(parent, list):
        return parent[_index(parent, token, path)]
    if isinstance(parent, dict) and token in parent:
        return parent[token]
    raise JsonPatchError(f"{op} {path}: not there")


def apply_json_patch(target: dict[str, Any], operations: Sequence[Mapping[str, Any]]) -> None:
    """Apply a JSON patch (RFC 6902) to ``target`` in place, as the API server applies
    ``application/json-patch+json``: its ``test``, ``add``, ``replace`` and ``remove``
    operations in order. :class:`JsonPatchError` for one that cannot be applied (a failed
    ``test`` included), ``target`` then left as it was: the patch applies whole or not at
    all."""
    patched = json.loads(json.dumps(target))
    for operation in operations:
        op, path = operation.get("op"), str(operation.get("path", ""))
        parent, token = _parent(patched, path)
        if op == "test":
            found = _member(parent, token, path, "test")
            if found != operation.get("value"):
                raise JsonPatchError(f"test {path}: {found!r} is not {operation.get('value')!r}")
        elif op == "replace":
            _member(parent, token, path, "replace")
            if isinstance(parent, list):
                parent[_index(parent, token, path)] = operation.get("value")
            else:
                parent[token] = operation.get("value")
        elif op == "add":
            if isinstance(parent, list):
                parent.insert(_index(parent, token, path, new=True), operation.get("value"))
            elif isinstance(parent, dict):
                parent[token] = operation.get("value")
            else:
                raise JsonPatchError(f"add {path}: its parent is not an object or a list")
        elif op == "remove":
            _member(parent, token, path, "remove")
            if isinstance(parent, list):
                del parent[_index(parent, token, path)]
            else:
                del parent[token]
        else:
            raise JsonPatchError(f"the JSON patch operation {op!r} is not applied here")
    target.clear()
    target.update(patched)


def apply_patch(
    target: dict[str, Any], patch: Mapping[str, Any] | Sequence[Mapping[str, Any]]
) -> None:
    """Apply a job's patch to ``target`` in place: a JSON merge patch (an object,
    :func:`merge_into`) or a JSON patch (a list of operations, :func:`apply_json_patch`)."""
    if isinstance(patch, Mapping):
        merge_into(target, patch)
    else:
        apply_json_patch(target, patch)
