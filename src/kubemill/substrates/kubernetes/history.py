"""A deleted job's history record on Kubernetes: one ConfigMap in the operator's namespace.

When a job is deleted (its ``ttlSecondsAfterFinished`` passed, or a user deleted it) the
operator writes what it last saw of it as one record (:func:`build_record`); the client
reads records back (:func:`record_body`) for ``kubemill get --history`` and the
dashboard. Both sides use this module, so the format has one definition.

A record is a ConfigMap named ``kubemill-history-<job uid>`` (a second writer of the same
deletion, e.g. another operator replica, gets a 409 and nothing doubles), labelled
:data:`LABEL_HISTORY` plus the job's namespace and kind (so a listing selects one namespace
on the server), with the deletion time in an annotation (the order in which the oldest are
pruned). Its one data key, :data:`RECORD_KEY`, holds JSON: the job (metadata less
``managedFields`` and kubectl's last-applied copy, spec, final status, conditions
included), each replica's last phase, exit code, restarts, times and reason, the Events
the operator posted on it, and when and why it went. No logs.

An object is at most 1 MiB in etcd: a record over :data:`MAX_RECORD_BYTES` loses its oldest
events first, then its replicas' messages; one still too large is not written.

The job's own label ``kubemill.dev/job-name`` is never put on a record: the operator
watches ConfigMaps carrying it as a job's delivered files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubemill.substrates.base import ReplicaView
from kubemill.substrates.kubernetes.observe import parse_time

LABEL_HISTORY = "kubemill.dev/history"
"""On every record (value :data:`FORMAT`): how a listing finds them."""
LABEL_NAMESPACE = "kubemill.dev/history-namespace"
"""The deleted job's namespace."""
LABEL_KIND = "kubemill.dev/history-kind"
"""The deleted job's kind."""
DELETED_AT_ANNOTATION = "kubemill.dev/deleted-at"
"""When the operator saw the job go (RFC 3339): records are pruned oldest first."""
FORMAT = "v1"
RECORD_KEY = "record.json"
NAME_PREFIX = "kubemill-history-"
MAX_RECORD_BYTES = 900 * 1024
"""The JSON's budget: etcd's 1 MiB per object, less room for the ConfigMap's metadata."""
DELETED_BY_TTL = "TTLExpired"
"""``deletedBy`` of a job deleted once its ``ttlSecondsAfterFinished`` had passed."""
DELETED_BY_USER = "Deleted"
"""``deletedBy`` of a job deleted by anyone before that (a user, a schedule's limits)."""

_DROPPED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)
_KEPT_METADATA = ("name", "namespace", "uid", "creationTimestamp", "labels", "annotations")


def stamp(moment: datetime) -> str:
    """An API timestamp (RFC 3339, seconds, UTC)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def record_name(uid: str) -> str:
    """The ConfigMap name of the record of the job with ``uid``."""
    return f"{NAME_PREFIX}{uid}"


def history_selector(namespace: str | None = None) -> str:
    """The label selector of the records (of jobs of ``namespace``, or of all)."""
    selector = f"{LABEL_HISTORY}={FORMAT}"
    return selector if namespace is None else f"{selector},{LABEL_NAMESPACE}={namespace}"


@dataclass(frozen=True)
class PostedEvent:
    """An Event the operator posted on a job, as a record keeps it."""

    time: datetime
    type: str
    reason: str
    message: str

    def to_wire(self) -> dict[str, Any]:
        # The fields of a core/v1 Event the client's event reader takes.
        return {
            "lastTimestamp": stamp(self.time),
            "type": self.type,
            "reason": self.reason,
            "message": self.message,
            "count": 1,
        }


def replica_wire(view: ReplicaView) -> dict[str, Any]:
    """One replica as a record keeps it (what ``kubemill describe`` shows of it)."""
    return {
        "name": view.name,
        "replicaType": view.replica_type,
        "index": view.index,
        "phase": view.phase,
        "exitCode": view.exit_code,
        "restarts": view.restarts,
        "started": stamp(view.started) if view.started else None,
        "finished": stamp(view.finished) if view.finished else None,
        "reason": view.reason,
        "message": view.message,
    }


def replica_from_wire(wire: Mapping[str, Any]) -> ReplicaView:
    """One replica as :func:`replica_wire` kept it."""
    exit_code = wire.get("exitCode")
    index = wire.get("index")
    return ReplicaView(
        name=str(wire.get("name") or ""),
        replica_type=str(wire.get("replicaType") or ""),
        index=index if isinstance(index, int) else 0,
        phase=str(wire.get("phase") or "Unknown"),
        exit_code=exit_code if isinstance(exit_code, int) else None,
        restarts=int(wire.get("restarts") or 0),
        started=parse_time(wire.get("started")),
        finished=parse_time(wire.get("finished")),
        reason=str(wire.get("reason") or ""),
        message=str(wire.get("message") or ""),
    )


def deleted_by(job: Mapping[str, Any], deleted: datetime) -> str:
    """Why the job went: :data:`DELETED_BY_TTL` when its TTL after its final condition had
    passed at ``deleted`` (the operator deletes it then), else :data:`DELETED_BY_USER`."""
    ttl = ((job.get("spec") or {}).get("runPolicy") or {}).get("ttlSecondsAfterFinished")
    status = job.get("status") or {}
    ended = status.get("completionTime") or next(
        (
            c.get("lastTransitionTime")
            for c in status.get("conditions") or ()
            if c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True"
        ),
        None,
    )
    end = parse_time(ended)
    if not isinstance(ttl, int) or end is None:
        return DELETED_BY_USER
    return DELETED_BY_TTL if (deleted - end).total_seconds() >= ttl else DELETED_BY_USER


def kept_job(job: Mapping[str, Any]) -> dict[str, Any]:
    """The job as a record keeps it: kind, the metadata that names it, spec and status."""
    meta = job.get("metadata") or {}
    kept: dict[str, Any] = {k: meta[k] for k in _KEPT_METADATA if k in meta}
    annotations = {
        k: v for k, v in (meta.get("annotations") or {}).items() if k not in _DROPPED_ANNOTATIONS
    }
    if annotations:
        kept["annotations"] = annotations
    else:
        kept.pop("annotations", None)
    return {
        "apiVersion": job.get("apiVersion"),
        "kind": job.get("kind"),
        "metadata": kept,
        "spec": job.get("spec") or {},
        "status": job.get("status") or {},
    }


def build_record(
    job: Mapping[str, Any],
    *,
    namespace: str,
    replicas: Sequence[ReplicaView],
    events: Sequence[PostedEvent],
    deleted: datetime,
) -> dict[str, Any] | None:
    """The ConfigMap (in the operator's ``namespace``) recording ``job``, deleted at
    ``deleted``; ``None`` if even without events and messages it exceeds the budget."""
    meta = job.get("metadata") or {}
    record: dict[str, Any] = {
        "format": FORMAT,
        "job": kept_job(job),
        "replicas": [replica_wire(r) for r in replicas],
        "events": [e.to_wire() for e in sorted(events, key=lambda e: e.time)],
        # Microseconds: records are pruned in this order, several a second.
        "deletedAt": deleted.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "deletedBy": deleted_by(job, deleted),
    }
    text = _fitted(record)
    if text is None:
        return None
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": record_name(str(meta.get("uid") or "")),
            "namespace": namespace,
            "labels": {
                "app.kubernetes.io/part-of": "kubemill",
                LABEL_HISTORY: FORMAT,
                LABEL_NAMESPACE: str(meta.get("namespace") or ""),
                LABEL_KIND: str(job.get("kind") or ""),
            },
            "annotations": {DELETED_AT_ANNOTATION: record["deletedAt"]},
        },
        "data": {RECORD_KEY: text},
    }


def _fitted(record: dict[str, Any]) -> str | None:
    """The record as JSON within :data:`MAX_RECORD_BYTES`: oldest events dropped first
    (their count kept), then the replicas' messages."""
    text = json.dumps(record, separators=(",", ":"))
    events: list[dict[str, Any]] = record["events"]
    if len(text.encode()) > MAX_RECORD_BYTES and events:
        # Halve until it fits, then the exact count is not worth more passes.
        keep = len(events)
        while keep and len(text.encode()) > MAX_RECORD_BYTES:
            keep //= 2
            record["events"] = events[len(events) - keep :] if keep else []
            record["eventsDropped"] = len(events) - keep
            text = json.dumps(record, separators=(",", ":"))
    if len(text.encode()) > MAX_RECORD_BYTES:
        for replica in record["replicas"]:
            replica["message"] = ""
        text = json.dumps(record, separators=(",", ":"))
    return text if len(text.encode()) <= MAX_RECORD_BYTES else None


def record_body(config_map: Mapping[str, Any]) -> dict[str, Any] | None:
    """The record a ConfigMap holds, or ``None`` if it holds none this version reads."""
    text = (config_map.get("data") or {}).get(RECORD_KEY)
    if not isinstance(text, str):
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        return None
    if not isinstance(record.get("job"), dict):
        return None
    return record


def deleted_at(config_map: Mapping[str, Any]) -> str:
    """The deletion time a record's ConfigMap is annotated with ('' if none): the pruning
    order (RFC 3339 in UTC sorts as text)."""
    annotations = (config_map.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(DELETED_AT_ANNOTATION) or "")
