"""The lifecycle protocol: how the core decides for one kind of job, chosen by its engine.

Every job is reconciled by one :class:`Lifecycle`, which its engine's registry entry names
(``Engine.lifecycle``), never a flag of its Plan. kubemill has three:

- :data:`kubemill.core.replicaset.REPLICA_SET`: pods the core creates one by one and judges
  by a success policy (TensorFlow's, PyTorch's and MPI's jobs, and any service replanned into
  replicas with a ``ServicePolicy``);
- :data:`kubemill.core.rerun.RERUN`: an application that runs again as a whole, the
  spark-operator's state machine over one deciding replica (a Spark application);
- :data:`kubemill.core.service.SERVICE_CLUSTER`: objects a Kubernetes controller keeps
  running (Deployments), Ready while enough of their pods serve, never Succeeded
  (a Mars cluster).

None of them names a kind: what one kind needs of its lifecycle is data in its Plan (a
``RerunPolicy``, a ``ServiceCluster``), and what a lifecycle decided beyond the common
status reaches the kind's own status fields through a neutral record handed to the Plan's
status extension (``StatusView.run``, ``StatusView.service``).

A lifecycle also tells the substrate the two things it must do differently for it: find
the job's pods by label rather than by name (:attr:`Lifecycle.pods_by_label`) and report a
create the API refuses instead of retrying it (:attr:`Lifecycle.judges_refusals`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kubemill.api import Job
    from kubemill.core.model import Observed, ReconcileResult
    from kubemill.frameworks.plan import Plan

INTERRUPTED = "Interrupted"
"""The Failed reason of a job stopped on request (:data:`~kubemill.api.STOP_ANNOTATION`),
whatever its lifecycle."""

GANG_SCHEDULERS = ("volcano", "scheduler-plugins")
"""The gang schedulers kubemill can create PodGroups for."""


@dataclass(frozen=True)
class ReconcileOptions:
    """How the substrate that calls :func:`kubemill.core.reconcile` is set up (not part of
    the job)."""

    gang_scheduler: str | None = None
    """``"volcano"``, ``"scheduler-plugins"`` or None. When set, every job gets a PodGroup
    (as upstream does whenever gang scheduling is enabled, schedulingPolicy or not) sized by
    ``schedulingPolicy.minAvailable`` (default: all replicas); with volcano, pods wait until
    the PodGroup has left the Pending phase (or has no phase yet), like upstream."""
    progress_interval: timedelta = timedelta(seconds=2)
    """The least time between two writes of a job's ``trainerStatus``: a program may
    report every step, but its status (an API write, a SQLite write) changes at most this
    often; the latest report is written once the interval has passed, and at the end."""

    def __post_init__(self) -> None:
        if self.gang_scheduler is not None and self.gang_scheduler not in GANG_SCHEDULERS:
            raise ValueError(
                f"gang_scheduler: unknown scheduler {self.gang_scheduler!r}; "
                f"use one of {', '.join(GANG_SCHEDULERS)} or leave it unset"
            )


DEFAULT_OPTIONS = ReconcileOptions()
"""A substrate without a gang scheduler."""


def refuse_unread(plan: Plan, lifecycle: str, *unread: str) -> None:
    """Raise if the Plan sets one of the ``unread`` fields, data only another lifecycle
    applies: a Plan whose ``retry`` no one honours would fail for good where its kind
    promises another attempt, silently. A framework's mistake, never the user's."""
    for field in unread:
        if getattr(plan, field) is not None:
            raise ValueError(
                f"{plan.kind} {plan.name}: the Plan sets {field}, which the {lifecycle} "
                "lifecycle does not run; pass the engine's lifecycle (Engine.lifecycle)"
            )


class Lifecycle(Protocol):
    """One way a job lives: a pure decision from (job, Plan, observed, now) to actions and
    the new status, idempotent on unchanged inputs."""

    @property
    def name(self) -> str:
        """``replica-set``, ``rerun``, ``service-cluster``: how docs and errors name it."""
        ...

    @property
    def pods_by_label(self) -> bool:
        """Whether the job's pods are kept by a controller (found by the job's label, with
        names nobody chooses) rather than created by the core one by one by name."""
        ...

    @property
    def judges_refusals(self) -> bool:
        """Whether a create the API refuses (4xx) is the core's to judge (reported as
        ``Observed.refused``: a refused submission) rather than a write to retry."""
        ...

    def reconcile(
        self, job: Job, plan: Plan, observed: Observed, now: datetime, options: ReconcileOptions
    ) -> ReconcileResult:
        """Decide what to do for ``job`` now; ``job.status`` is the status last recorded."""
        ...


__all__ = ["DEFAULT_OPTIONS", "GANG_SCHEDULERS", "INTERRUPTED", "Lifecycle", "ReconcileOptions"]
