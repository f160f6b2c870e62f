"""What every substrate offers the SDK: the :class:`Backend` protocol and its records.

The records are plain data so the CLI can print them the same way whichever
substrate answered.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Literal, Protocol

# The errors live in a module of their own, imported where no job model and none of the
# records below are (spark-submit's fast path, `kubemill get`'s store); every substrate and
# the SDK name them from here. So do a job list's rows (:mod:`kubemill.substrates.rows`).
from kubemill.substrates.errors import JobExists as JobExists
from kubemill.substrates.errors import JobNotFound as JobNotFound
from kubemill.substrates.errors import SubstrateError as SubstrateError

if TYPE_CHECKING:
    from kubemill.api import Job, JobStatus

Patch = Mapping[str, object] | Sequence[Mapping[str, object]]
"""A change to a job: a JSON merge patch (an object) or a JSON patch (RFC 6902: a list of
operations)."""


@dataclass(frozen=True)
class ReplicaView:
    """One replica as a user sees it in ``get``/``describe``."""

    name: str
    replica_type: str
    index: int
    phase: str
    """Pending, Running, Succeeded, Failed or Unknown; locally also Stopped (ended by
    kubemill because the job finished, was interrupted or deleted, or the reconciler
    deleted the pod)."""
    exit_code: int | None = None
    restarts: int = 0
    pid: int | None = None
    started: datetime | None = None
    finished: datetime | None = None
    reason: str = ""
    """A short code: ``Completed``, ``Error``, ``StartError``, ``Stopped``, ..."""
    message: str = ""
    """Why, in words, when there is more to say than the reason."""
    address: str = ""
    """Where it listens (``127.0.0.1:41234`` locally, the pod IP on a cluster)."""


@dataclass(frozen=True)
class JobView:
    """A job with its status and replicas."""

    job: Job
    status: JobStatus
    replicas: tuple[ReplicaView, ...] = ()
    created: datetime | None = None

    @property
    def name(self) -> str:
        return self.job.name

    @property
    def namespace(self) -> str:
        return self.job.namespace

    @property
    def kind(self) -> str:
        return self.job.KIND

    @property
    def phase(self) -> str:
        return self.status.phase

    @property
    def finished(self) -> bool:
        return self.status.finished


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
class SubmitOptions:
    """How to submit: ``detach`` hands the job to a background supervisor (local)."""

    detach: bool = True
    namespace: str | None = None
    base_dir: str | None = None
    """Local only: relative ``workingDir`` and the default working directory resolve here
    (the CLI passes the manifest's directory; the SDK defaults to the current directory)."""
    owner_pid: int | None = None
    """Local only: the process that owns the job; once it has ended, however it ended, the
    job is stopped and deleted (as Kubernetes' garbage collector deletes an object whose
    owner is gone). See :mod:`kubemill.substrates.local.owner`."""
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ProgressPoint:
    """One progress report of a job's program, for a plot of its metrics over steps."""

    time: float | None
    """When it was made (seconds since the epoch), if known."""
    step: int | None
    metrics: Mapping[str, float]


@dataclass(frozen=True)
class Children:
    """Pods a job's program created itself (a Spark driver's executors), under ``title``;
    ``note`` says what they are where the substrate has no pods of them."""

    title: str
    pods: tuple[ReplicaView, ...] = ()
    note: str = ""


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


class Backend(Protocol):
    """The operations of one substrate. Names are ``(namespace, name)``."""

    def submit(self, job: Job, options: SubmitOptions) -> JobView:
        """Record the job and start running it; returns at once (see ``detach``)."""
        ...

    def get(self, name: str, namespace: str | None = None) -> JobView:
        """The job now. Raises :class:`JobNotFound` if there is none."""
        ...

    def list(self, namespace: str | None = None) -> list[JobView]:
        """All jobs (of the namespace, or every namespace when ``None``)."""
        ...

    def wait(
        self, name: str, namespace: str | None = None, timeout: float | None = None
    ) -> JobView:
        """Block until the job has finished (Succeeded or Failed) or ``timeout`` passes."""
        ...

    def logs(
        self,
        name: str,
        namespace: str | None = None,
        *,
        replica: str | None = None,
        follow: bool = False,
        query: LogQuery | None = None,
    ) -> Iterator[LogLine]:
        """Lines of every replica (or one); with ``follow``, until the job has finished.

        ``query`` narrows each replica's lines (tail, since, limit_bytes, timestamps).
        """
        ...

    def events(self, name: str, namespace: str | None = None) -> builtins.list[EventRecord]:
        """Events recorded on the job, oldest first."""
        ...

    def progress(self, name: str, namespace: str | None = None) -> builtins.list[ProgressPoint]:
        """The progress reports of the replica the job's ``trainerStatus`` follows, oldest
        first (as many as the substrate keeps; none if the program reported nothing)."""
        ...

    def resources(self, name: str, namespace: str | None = None) -> ResourceReport:
        """Each replica's CPU and memory over time, as far as the substrate knows them."""
        ...

    def children(self, name: str, namespace: str | None = None) -> Children | None:
        """The pods the job's program created itself, if its kind has any (None if not)."""
        ...

    def interrupt(
        self,
        name: str,
        namespace: str | None = None,
        *,
        force: bool = False,
        why: str = "kubemill interrupt",
    ) -> JobView:
        """Stop the job for good: set the stop annotation (``kubemill.dev/stop: why``).

        The core records it Failed with reason ``Interrupted`` and deletes its pods; waits
        until they are gone (``force``: no grace period). A finished job is left as it is.
        """
        ...

    def suspend(self, name: str, namespace: str | None = None) -> JobView:
        """Set ``spec.runPolicy.suspend``: the core deletes the pods and marks it Suspended."""
        ...

    def resume(self, name: str, namespace: str | None = None) -> JobView:
        """Clear ``spec.runPolicy.suspend``: the core creates the pods again."""
        ...

    def patch(self, name: str, patch: Patch, namespace: str | None = None) -> JobView:
        """Change an unfinished job with ``patch``: a JSON merge patch (an object; a list
        in it replaces the list) or a JSON patch (RFC 6902, a list of operations, applied
        whole or not at all: a failed ``test`` refuses it with ``SubstrateError``); the
        core judges the change (a group's ``replicas``: pods created or deleted)."""
        ...

    def delete(self, name: str, namespace: str | None = None) -> None:
        """Stop every replica and remove the job."""
        ...
