"""What every substrate offers the SDK: the :class:`Backend` protocol and its records.

The records are plain data so the CLI can print them the same way whichever
substrate answered.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

from kubemill.api import Job, JobStatus


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


@dataclass(frozen=True)
class SubmitOptions:
    """How to submit: ``detach`` hands the job to a background supervisor (local)."""

    detach: bool = True
    namespace: str | None = None
    base_dir: str | None = None
    """Local only: relative ``workingDir`` and the default working directory resolve here
    (the CLI passes the manifest's directory; the SDK defaults to the current directory)."""
    extra: dict[str, str] = field(default_factory=dict)


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
    ) -> Iterator[LogLine]:
        """Lines of every replica (or one); with ``follow``, until the job has finished."""
        ...

    def events(self, name: str, namespace: str | None = None) -> builtins.list[EventRecord]:
        """Events recorded on the job, oldest first."""
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

    def delete(self, name: str, namespace: str | None = None) -> None:
        """Stop every replica and remove the job."""
        ...


class SubstrateError(RuntimeError):
    """A substrate could not do what was asked; the message says what to do."""


class JobNotFound(SubstrateError, LookupError):
    """No job of that name."""


class JobExists(SubstrateError):
    """A job of that name already exists (and has not been deleted)."""
