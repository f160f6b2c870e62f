"""The records of a job's reads beyond its view: its events, its log lines and how to ask
for them, its progress reports and its resource samples.

Every substrate returns these and the SDK, the CLI and the dashboard show them, but none is
made when a job is submitted or listed, so they live apart from the :class:`JobView` of
:mod:`kubemill.substrates.base` (which still offers each name, loaded on first use): a
frozen dataclass costs ~0.4 ms to make, and ``kubemill run --detach`` made these six for
nothing.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from kubemill.api import JobStatus


@dataclass(frozen=True)
class EventRecord:
    """An event on a job (Kubernetes Event or local equivalent)."""

    time: datetime
    type: Literal["Normal", "Warning"]
    reason: str
    message: str
    count: int = 1


@dataclass(frozen=True)
class LogLine:
    """One line of a replica's output."""

    replica: str
    text: str
    time: datetime | None = None
    """When it was written (locally: first seen complete, at most a fraction of a second
    late); ``None`` when unknown."""
    rotated_away: int = 0
    """Bytes of the replica's output just before this line that were rotated away before a
    follower read them (it fell further behind than the log keeps); 0 when none, or when
    the substrate cannot tell."""

    def stamped(self) -> LogLine:
        """The line with its time in front of its text, as ``kubectl logs --timestamps``."""
        if self.time is None:
            return self
        stamp = self.time.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return replace(self, text=f"{stamp} {self.text}")


@dataclass(frozen=True)
class LogQuery:
    """Which lines of each replica's log to read, as ``kubectl logs`` asks for them."""

    tail: int | None = None
    """Only the last N lines (``None``: all)."""
    since: datetime | timedelta | None = None
    """Only lines written at or after this time, or within this long before now."""
    limit_bytes: int | None = None
    """At most this many bytes (newlines counted) per replica; the last line may be cut."""
    timestamps: bool = False
    """Start each line's text with its time (RFC 3339), as ``kubectl logs --timestamps``.
    :attr:`LogLine.time` is set either way when the substrate knows it."""

    def __post_init__(self) -> None:
        if self.tail is not None and (isinstance(self.tail, bool) or self.tail < 0):
            raise ValueError(f"tail: must be a number of lines >= 0, got {self.tail!r}")
        if self.limit_bytes is not None and (
            isinstance(self.limit_bytes, bool) or self.limit_bytes < 1
        ):
            raise ValueError(f"limit_bytes: must be >= 1, got {self.limit_bytes!r}")
        if self.since is not None and not isinstance(self.since, datetime | timedelta):
            raise ValueError(
                f"since: expected a datetime or a timedelta, got {type(self.since).__name__}"
            )
        if isinstance(self.since, timedelta) and self.since < timedelta(0):
            raise ValueError(f"since: a duration must not be negative, got {self.since}")

    def since_time(self, now: datetime) -> datetime | None:
        """``since`` as a moment (a duration counts back from ``now``)."""
        if self.since is None:
            return None
        if isinstance(self.since, timedelta):
            return now - self.since
        return self.since if self.since.tzinfo else self.since.replace(tzinfo=UTC)

    def since_timestamp(self) -> float | None:
        """``since`` as POSIX seconds, a duration counted back from the current time."""
        moment = self.since_time(datetime.now(UTC))
        return None if moment is None else moment.timestamp()


@dataclass(frozen=True)
class ProgressPoint:
    """One progress report of a job's program, for a plot of its metrics over steps."""

    time: float | None
    """When it was made (seconds since the epoch), if known."""
    step: int | None
    metrics: Mapping[str, float]


@dataclass(frozen=True)
class ResourceSample:
    """What a replica's processes used at one moment, for a plot over time."""

    time: float
    """Seconds since the epoch."""
    cpu_cores: float
    """CPU time used per second of wall time since the previous sample (1.0: one core
    busy)."""
    memory_bytes: int


@dataclass(frozen=True)
class ResourceReport:
    """Each replica's resource samples, oldest first, and what the substrate has to say
    when it has none to give (``note``: a cluster without a metrics API)."""

    replicas: Mapping[str, builtins.list[ResourceSample]]
    note: str = ""


def status_point(status: JobStatus) -> builtins.list[ProgressPoint]:
    """The one report a job's status holds (``trainerStatus``), for a substrate that keeps
    no history of them (its metrics' numbers read back from their text)."""
    shown = status.trainer_status
    if shown is None:
        return []
    metrics: dict[str, float] = {}
    for metric in shown.metrics:
        try:
            metrics[metric.name] = float(metric.value)
        except ValueError:
            continue
    when = shown.last_updated_time.timestamp() if shown.last_updated_time else None
    return [ProgressPoint(when, shown.step, metrics)]


__all__ = [
    "EventRecord",
    "LogLine",
    "LogQuery",
    "ProgressPoint",
    "ResourceReport",
    "ResourceSample",
    "status_point",
]
