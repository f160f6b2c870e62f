"""The runs a local controller object owns, as recorded: what its loop
(:mod:`.schedules`) observes, and what :class:`~.backend.LocalBackend` deletes with it.

Apart from both, so that the backend and the controller loop (which drives the backend)
do not import each other.
"""

from __future__ import annotations

from typing import Protocol

from kubemill.api import JobStatus
from kubemill.core import ObservedRun
from kubemill.kinds import controller_for, status_type
from kubemill.substrates.base import JobView
from kubemill.substrates.local.store import JobRecord


class JobLister(Protocol):
    """Where the runs are listed from (the local backend)."""

    def list(self, namespace: str | None = None) -> list[JobView]:
        """The jobs of a namespace."""
        ...


def owned_runs(jobs: JobLister, rec: JobRecord) -> list[ObservedRun]:
    """The runs of the controller ``rec`` as last recorded (its rules' run label with its
    name, and its uid as their controlling owner)."""
    controller = controller_for(rec.kind)
    label = controller.rules.run_label
    model = status_type(controller.controls)
    runs = []
    for view in jobs.list(rec.namespace):
        meta = view.job.metadata
        if view.kind != controller.controls or meta.labels.get(label) != rec.name:
            continue
        owners = [o for o in meta.owner_references or () if o.controller]
        if not owners or owners[0].uid != rec.uid:
            continue  # a namesake's, or a run of an earlier controller of this name
        status: JobStatus = view.status
        if not isinstance(status, model):
            status = model()
        runs.append(
            ObservedRun(name=view.name, uid=meta.uid or "", status=status, created=view.created)
        )
    return runs
