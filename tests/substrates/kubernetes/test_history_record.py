"""A deleted job's history record: what it keeps, how it fits etcd's 1 MiB, why the job went."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from kubemill.substrates.base import ReplicaView
from kubemill.substrates.kubernetes.client.history import job_record
from kubemill.substrates.kubernetes.history import (
    DELETED_BY_TTL,
    DELETED_BY_USER,
    MAX_RECORD_BYTES,
    RECORD_KEY,
    PostedEvent,
    build_record,
    deleted_by,
)
from support.operator_jobs import pytorchjob

DELETED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def finished_job(*, ttl: int | None = None, ended: datetime = DELETED) -> dict[str, Any]:
    job = pytorchjob("j", workers=0, run_policy={"ttlSecondsAfterFinished": ttl} if ttl else None)
    job["metadata"].update(
        namespace="ns",
        uid="u-1",
        creationTimestamp="2026-01-01T00:00:00Z",
        managedFields=[{"manager": "kubectl"}],
        annotations={"kubectl.kubernetes.io/last-applied-configuration": "{...}", "keep": "me"},
    )
    stamp = ended.strftime("%Y-%m-%dT%H:%M:%SZ")
    job["status"] = {
        "conditions": [{"type": "Succeeded", "status": "True", "lastTransitionTime": stamp}],
        "completionTime": stamp,
    }
    return job


def test_a_record_keeps_the_job_less_bookkeeping_and_reads_back_as_it_was() -> None:
    replica = ReplicaView("j-master-0", "Master", 0, "Succeeded", exit_code=0, restarts=1)
    events = [PostedEvent(DELETED, "Normal", "PyTorchJobSucceeded", "done")]
    config_map = build_record(
        finished_job(), namespace="ops", replicas=[replica], events=events, deleted=DELETED
    )
    assert config_map is not None
    assert config_map["metadata"]["name"] == "kubemill-history-u-1"
    assert config_map["metadata"]["namespace"] == "ops"
    assert "kubemill.dev/job-name" not in config_map["metadata"]["labels"]
    body = json.loads(config_map["data"][RECORD_KEY])
    assert "managedFields" not in body["job"]["metadata"]
    assert body["job"]["metadata"]["annotations"] == {"keep": "me"}

    record = job_record(config_map)
    assert record is not None
    assert (record.name, record.namespace, record.kind) == ("j", "ns", "PyTorchJob")
    assert record.view.phase == "Succeeded"
    assert record.deleted == DELETED
    assert [(r.name, r.exit_code, r.restarts) for r in record.view.replicas] == [
        ("j-master-0", 0, 1)
    ]
    assert [e.reason for e in record.events] == ["PyTorchJobSucceeded"]


def test_a_record_too_large_drops_its_oldest_events_first() -> None:
    events = [
        PostedEvent(DELETED + timedelta(seconds=i), "Normal", f"R{i}", "x" * 10_000)
        for i in range(200)
    ]
    config_map = build_record(
        finished_job(), namespace="ops", replicas=[], events=events, deleted=DELETED
    )
    assert config_map is not None
    text = config_map["data"][RECORD_KEY]
    assert len(text.encode()) <= MAX_RECORD_BYTES
    body = json.loads(text)
    kept = [e["reason"] for e in body["events"]]
    assert kept and kept == [f"R{i}" for i in range(200 - len(kept), 200)]
    assert body["eventsDropped"] == 200 - len(kept)


def test_a_job_deleted_after_its_ttl_passed_went_by_ttl_any_other_by_someone() -> None:
    ended = DELETED - timedelta(seconds=30)
    assert deleted_by(finished_job(ttl=10, ended=ended), DELETED) == DELETED_BY_TTL
    assert deleted_by(finished_job(ttl=60, ended=ended), DELETED) == DELETED_BY_USER
    assert deleted_by(finished_job(ended=ended), DELETED) == DELETED_BY_USER
    running = finished_job(ttl=1)
    running["status"] = {}
    assert deleted_by(running, DELETED) == DELETED_BY_USER
