"""A job's Kubernetes Events (``core/v1``, ``involvedObject`` the job) as the CLI prints them."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from kubemill.substrates.base import EventRecord
from kubemill.substrates.kubernetes.client.kinds import Found
from kubemill.substrates.kubernetes.observe import parse_time


def event_selector(found: Found) -> str:
    """The field selector of the Events about ``found`` (its uid too: not a namesake's)."""
    return ",".join(
        [
            f"involvedObject.kind={found.kind.kind}",
            f"involvedObject.name={found.name}",
            *([f"involvedObject.uid={found.uid}"] if found.uid else []),
        ]
    )


def event_record(item: Mapping[str, Any]) -> EventRecord:
    """One Event, with the best time it has (the last occurrence first) and its count."""
    meta = item.get("metadata") or {}
    moment = (
        parse_time(item.get("lastTimestamp"))
        or parse_time(item.get("eventTime"))
        or parse_time(item.get("firstTimestamp"))
        or parse_time(meta.get("creationTimestamp"))
        or datetime.fromtimestamp(0, UTC)
    )
    series = item.get("series") or {}
    count = item.get("count") or series.get("count") or 1
    return EventRecord(
        time=moment,
        type="Warning" if item.get("type") == "Warning" else "Normal",
        reason=str(item.get("reason") or ""),
        message=str(item.get("message") or ""),
        count=int(count),
    )
