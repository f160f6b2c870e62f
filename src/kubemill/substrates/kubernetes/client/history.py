"""Reading the operator's records of deleted jobs (``kubemill get --history``).

One list of the record ConfigMaps in the operator's namespace (the records of one
namespace's jobs selected by label on the server), each read back into a
:class:`~kubemill.substrates.history.JobRecord` through the same job loading and Event
reading as a live job. The format is :mod:`kubemill.substrates.kubernetes.history`.
Reading them needs ``list configmaps`` in the operator's namespace, which a user who may
see the jobs of every namespace usually has; a refusal is reported as for any other
call (which verb on which resource).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kubemill.substrates.base import JobView
from kubemill.substrates.history import JobRecord
from kubemill.substrates.kubernetes.client.connection import Http
from kubemill.substrates.kubernetes.client.errors import KubeApiError, Request
from kubemill.substrates.kubernetes.client.events import event_record
from kubemill.substrates.kubernetes.client.kinds import load_job
from kubemill.substrates.kubernetes.history import (
    history_selector,
    record_body,
    replica_from_wire,
)
from kubemill.substrates.kubernetes.observe import parse_time
from kubemill.substrates.kubernetes.transport import api_path

logger = logging.getLogger(__name__)


def read_records(http: Http, *, operator_namespace: str, namespace: str | None) -> list[JobRecord]:
    """The records of deleted jobs of ``namespace`` (all when ``None``), oldest deletion
    first. None when the operator's namespace does not exist (no operator installed)."""
    request = Request("list", "configmaps", "", operator_namespace)
    path = api_path(group="", version="v1", plural="configmaps", namespace=operator_namespace)
    try:
        query = [("labelSelector", history_selector(namespace))]
        answer = http.json(request, "GET", path, query=query)
    except KubeApiError as exc:
        if exc.status == 404:
            return []
        raise
    records = []
    for item in answer.get("items") or ():
        record = job_record(item)
        if record is not None and (namespace is None or record.namespace == namespace):
            records.append(record)
    return sorted(records, key=lambda r: (r.deleted is None, r.deleted, r.namespace, r.name))


def job_record(config_map: Mapping[str, Any]) -> JobRecord | None:
    """One record ConfigMap as a :class:`JobRecord`; ``None`` (logged) if it is not one
    this version reads (another format, a kind no longer registered)."""
    body = record_body(config_map)
    name = (config_map.get("metadata") or {}).get("name")
    if body is None:
        logger.warning("history record %s: not a record this kubemill reads", name)
        return None
    try:
        job = load_job(body["job"])
    except Exception as exc:  # a record of a kind or version this kubemill does not know
        logger.warning("history record %s: %s", name, exc)
        return None
    # The group it was deleted from (an upstream one's job is shown as one), as a live read.
    job.api_version = str(body["job"].get("apiVersion") or job.api_version)
    view = JobView(
        job=job,
        status=job.status,
        replicas=tuple(
            replica_from_wire(r) for r in body.get("replicas") or () if isinstance(r, dict)
        ),
        created=parse_time(job.metadata.creation_timestamp),
    )
    events = tuple(
        sorted(
            (event_record(e) for e in body.get("events") or () if isinstance(e, dict)),
            key=lambda e: e.time,
        )
    )
    return JobRecord(
        view=view,
        deleted=parse_time(body.get("deletedAt")),
        deleted_by=str(body.get("deletedBy") or ""),
        events=events,
        uid=str(job.metadata.uid or ""),
    )
