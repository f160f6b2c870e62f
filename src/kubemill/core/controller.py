"""The controller protocol: kinds that run no pods but create and delete jobs of another kind.

A controller (a Spark schedule creates a Spark application each time its schedule
is due) is decided by its own pure :meth:`ControllerRules.decide`: from the controller's
object (with its last status), the runs it owns as last seen and ``now``, to runs to create
and delete, the new status, and when to look again. The registry names each controller
kind's rules (``Controller.rules``); the operator and the local substrate run every one of
them through one generic loop, which reads the runs (the jobs carrying the rules'
:attr:`~ControllerRules.run_label` whose controlling owner is the controller), asks the
rules, carries the actions out and writes the status as returned.

Nothing here names a kind: a run is any job, judged by its status's
:attr:`~kubemill.api.JobStatus.run_outcome`. What a controller needs of its substrate that
a pure function cannot do itself (reading the time-zone database) comes in a
:class:`ControllerContext`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from typing import Any, Generic, Literal, Protocol, TypeVar

from kubemill.api import Job, JobStatus
from kubemill.core.model import RecordEvent

RunOutcome = Literal["active", "succeeded", "failed"]

StatusT = TypeVar("StatusT", bound=JobStatus, covariant=True)


@dataclass(frozen=True)
class ObservedRun:
    """One job a controller created, as last seen."""

    name: str
    uid: str
    status: JobStatus
    created: datetime | None = None
    deleting: bool = False
    """Being deleted (``deletionTimestamp`` set): neither active nor history any more."""

    @property
    def outcome(self) -> RunOutcome:
        """Whether the run still runs (its kind's status says how to tell)."""
        return self.status.run_outcome


@dataclass(frozen=True)
class CreateRun:
    """Create the run ``run``, owned by the controller (the substrate sets the owner's
    apiVersion to the group it serves); ``due``: the time it was due, for a schedule."""

    name: str
    due: datetime | None
    run: Job


@dataclass(frozen=True)
class DeleteRun:
    """Delete one run (``uid`` as a precondition); ``why`` says why, in a word (a schedule's
    ``replace`` or ``history``)."""

    name: str
    uid: str
    why: str


ControllerAction = CreateRun | DeleteRun | RecordEvent


@dataclass(frozen=True)
class ControllerResult(Generic[StatusT]):
    """One pass's decisions: actions in order (an action's event right after it), the new
    status, and when to look again (None: only when something changes)."""

    actions: tuple[ControllerAction, ...]
    status: StatusT
    requeue_after: timedelta | None
    wake_at: datetime | None = None
    """The moment the next pass is due (a schedule's next run), if any: a loop wakes at it
    exactly, whatever the pass's own clock was rounded to."""
    refusal: str | None = None
    """Why the controller cannot be in force (its spec does not parse), if it cannot."""


@dataclass(frozen=True)
class SampleRun:
    """A run as the controller would create it, for a substrate to check before the
    controller starts (a file it names that this machine lacks)."""

    job: Job
    spec_path: str
    """Where the run's ``spec`` is in the controller's manifest (``spec.template``): its
    problems are reported there."""


def _no_zone(name: str | None) -> tzinfo | str:
    return f"time zone {name!r}: this substrate resolves no time zones"


@dataclass(frozen=True)
class ControllerContext:
    """What a substrate supplies to a controller's pure decision."""

    zone_of: Callable[[str | None], tzinfo | str] = field(default=_no_zone)
    """A time zone by name (None or ``Local``: the substrate's own), or why it is unknown
    (the zone database is files, which the core does not read)."""


class ControllerRules(Protocol):
    """One controller kind's decisions (:mod:`kubemill.engines.spark.schedule`'s for a schedule)."""

    @property
    def run_label(self) -> str:
        """The label each run carries, whose value is its controller's name (how both
        substrates find the runs; the controlling owner's uid then confirms them)."""
        ...

    def decide(
        self,
        job: Job,
        runs: Sequence[ObservedRun],
        *,
        now: datetime,
        context: ControllerContext,
    ) -> ControllerResult[JobStatus]:
        """One pass over the controller ``job`` (its kind's model, with its status)."""
        ...

    def refuse(self, status: Mapping[str, Any], reason: str) -> ControllerResult[JobStatus]:
        """The result for an object that does not even load (``status``: its status as
        found): it cannot be in force, and ``reason`` says why."""
        ...

    def sample_run(self, job: Job) -> SampleRun | None:
        """A run of ``job`` as it would be created (None: none to check)."""
        ...


__all__ = [
    "ControllerAction",
    "ControllerContext",
    "ControllerResult",
    "ControllerRules",
    "CreateRun",
    "DeleteRun",
    "ObservedRun",
    "RunOutcome",
    "SampleRun",
]
