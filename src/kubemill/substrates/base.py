"""What every substrate offers the SDK: the :class:`Backend` protocol and its records.

The records are plain data so the CLI can print them the same way whichever
substrate answered.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

# The errors live in a module of their own, imported where no job model and none of the
# records below are (spark-submit's fast path, `kubemill get`'s store); every substrate and
# the SDK name them from here. So do a job list's rows (:mod:`kubemill.substrates.rows`).
from kubemill.substrates.errors import JobExists as JobExists
from kubemill.substrates.errors import JobNotFound as JobNotFound
from kubemill.substrates.errors import SubstrateError as SubstrateError

if TYPE_CHECKING:
    from kubemill.api import Job, JobStatus

    # The records of a job's other reads (events, logs, progress, resources) are offered
    # here too (:data:`READS`), loaded on first use (:func:`__getattr__`): no submission or
    # listing makes one (see :mod:`kubemill.substrates.reads`).
    from kubemill.substrates.reads import EventRecord as EventRecord
    from kubemill.substrates.reads import LogLine as LogLine
    from kubemill.substrates.reads import LogQuery as LogQuery
    from kubemill.substrates.reads import ProgressPoint as ProgressPoint
    from kubemill.substrates.reads import ResourceReport as ResourceReport
    from kubemill.substrates.reads import ResourceSample as ResourceSample
    from kubemill.substrates.reads import status_point as status_point

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
class Children:
    """Pods a job's program created itself (a Spark driver's executors), under ``title``;
    ``note`` says what they are where the substrate has no pods of them."""

    title: str
    pods: tuple[ReplicaView, ...] = ()
    note: str = ""


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


READS = frozenset(
    {
        "EventRecord",
        "LogLine",
        "LogQuery",
        "ProgressPoint",
        "ResourceReport",
        "ResourceSample",
        "status_point",
    }
)
"""The names of :mod:`kubemill.substrates.reads` this module offers."""


if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        """A name of :mod:`kubemill.substrates.reads` (:data:`READS`), imported now
        (once). Any other name is not there: it must not load them."""
        if name not in READS:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from kubemill.substrates import reads

        value = getattr(reads, name)
        globals()[name] = value
        return value
