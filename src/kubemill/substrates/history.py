"""What a substrate keeps of a job once it is deleted: :class:`JobRecord`.

A substrate that keeps such records offers :class:`KeepsHistory` (the Kubernetes one: the
operator's records, see :mod:`kubemill.substrates.kubernetes.history`); the SDK's
``JobClient.history`` asks it. The local substrate keeps a finished job in its store until
the job is deleted and nothing after that, so it has none.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from kubemill.substrates.base import JobView

if TYPE_CHECKING:
    from kubemill.substrates.reads import EventRecord


@dataclass(frozen=True)
class JobRecord:
    """A deleted job as it was last seen: spec, final status and replicas (``view``), the
    events recorded on it, and when and why it went."""

    view: JobView
    deleted: datetime | None
    deleted_by: str
    """``TTLExpired`` (its ttlSecondsAfterFinished had passed) or ``Deleted``."""
    events: tuple[EventRecord, ...] = ()
    uid: str = ""

    @property
    def name(self) -> str:
        return self.view.name

    @property
    def namespace(self) -> str:
        return self.view.namespace

    @property
    def kind(self) -> str:
        return self.view.kind


@runtime_checkable
class KeepsHistory(Protocol):
    """A backend that keeps records of deleted jobs."""

    def history(self, namespace: str | None = None) -> builtins.list[JobRecord]:
        """The records of deleted jobs (of ``namespace``, or all), oldest deletion first."""
        ...
