"""The reconciler: one pure function from (job, Plan, observed, now) to actions and a status.

:func:`reconcile` is level-triggered: it looks only at the job (with its last status), the
Plan and what the substrate observed, and says what to do now. Running it again on the same
inputs after its actions took effect yields no actions at all (not even events), so a
substrate may call it as often as it likes.

What it decides is the job's :class:`~kubemill.core.lifecycle.Lifecycle`'s business, and
the lifecycle is the one the job's engine names in the registry (``Engine.lifecycle``),
passed in by the substrate: the replica-set rules (:mod:`kubemill.core.replicaset`, the
default), an application that runs again as a whole (:mod:`kubemill.core.rerun`) or a
service cluster (:mod:`kubemill.core.service`). The Plan only carries the data a lifecycle
reads; nothing here looks at it to choose.
"""

from __future__ import annotations

from datetime import datetime

from kubemill.api import Job
from kubemill.core.controlled import with_controllers
from kubemill.core.jobpass import describe_failure, short_name
from kubemill.core.lifecycle import (
    DEFAULT_OPTIONS,
    GANG_SCHEDULERS,
    INTERRUPTED,
    Lifecycle,
    ReconcileOptions,
)
from kubemill.core.model import Observed, ReconcileResult
from kubemill.core.replicaset import OUTCOME_TIE, REPLICA_SET, REPORT_GRACE
from kubemill.frameworks.plan import Plan


def reconcile(
    job: Job,
    plan: Plan,
    observed: Observed,
    now: datetime,
    *,
    options: ReconcileOptions = DEFAULT_OPTIONS,
    lifecycle: Lifecycle = REPLICA_SET,
) -> ReconcileResult:
    """Decide what to do for ``job`` now by its engine's ``lifecycle``; ``job.status`` is
    the status last recorded.

    Pure: the same inputs always give the same result, and nothing outside is touched.
    The pods of replicas that run through a child controller are read from it first
    (:mod:`kubemill.core.controlled`), whatever the lifecycle.
    """
    return lifecycle.reconcile(job, plan, with_controllers(plan, observed), now, options)


__all__ = [
    "GANG_SCHEDULERS",
    "INTERRUPTED",
    "OUTCOME_TIE",
    "REPORT_GRACE",
    "ReconcileOptions",
    "describe_failure",
    "reconcile",
    "short_name",
]
