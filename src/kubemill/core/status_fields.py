"""The kind's own status fields (:func:`extend_status`: what a Plan's status extension makes
of a pass) and the remote run's report a pass judges (:func:`current_report`).

Every lifecycle ends its pass by handing the kind's status extension what it decided (the
common status, the pods, the lifecycle's neutral record: a re-run's ``RunRecord``, a service
cluster's ``ServiceView``, a whole-run retry's ``Attempts``) and the report of the Plan's
remote run the core judged. That report is the substrate's last one only while it came from
the ``after`` replica's live pod (``RemoteReport.source``): a Ray job's FAILED from the head
of an attempt torn down for a retry is never taken for the new head's.
"""

from __future__ import annotations

from kubemill.api import Job, JobStatus
from kubemill.core.model import Observed
from kubemill.frameworks.plan import (
    ObservedPodView,
    Plan,
    RunRecord,
    ServiceView,
    StatusView,
)
from kubemill.frameworks.remote import Attempts, RemoteReport


def current_report(plan: Plan, observed: Observed) -> RemoteReport | None:
    """The report of the Plan's remote run the core may judge: the substrate's last one,
    unless it came from another pod than the ``after`` replica's live one (a service torn
    down since, e.g. the head of an attempt that failed and was retried). A report that
    does not say its source is taken as it is."""
    remote, report = plan.remote, observed.remote
    if remote is None or report is None or not report.source:
        return report
    for pod in observed.pods:
        if pod.name == remote.after and not pod.deleting and not pod.owner:
            return report if pod.uid == report.source else None
    return None


def extend_status(
    job: Job,
    plan: Plan,
    status: JobStatus,
    observed: Observed,
    *,
    run: RunRecord | None = None,
    service: ServiceView | None = None,
    attempts: Attempts | None = None,
) -> None:
    """Write the kind's own status fields into ``status`` (in place): what the Plan's
    status extension makes of the pass's outcome and of the lifecycle's neutral record
    (``run``: the re-run lifecycle's; ``service``: the service-cluster lifecycle's;
    ``attempts``: the count of a Plan's whole-run retries)."""
    extension = plan.status_extension
    if extension is None:
        return
    pods = tuple(
        ObservedPodView(
            name=pod.name,
            replica_type=pod.replica_type,
            index=pod.index,
            phase=pod.phase,
            ready=pod.ready,
            owner=pod.owner,
        )
        for pod in sorted(observed.pods, key=lambda p: p.name)
    )
    fields = extension(
        StatusView(
            job=job,
            plan=plan,
            status=status,
            pods=pods,
            run=run,
            cluster_ips=observed.cluster_ips,
            service=service,
            remote=current_report(plan, observed),
            attempts=attempts,
        )
    )
    model_fields = type(status).model_fields
    unknown = sorted(name for name in fields if name not in model_fields)
    if unknown:
        raise ValueError(
            f"{job.KIND or plan.kind}: the status extension sets {', '.join(unknown)}, which "
            f"{type(status).__name__} does not declare"
        )
    for name, value in fields.items():
        setattr(status, name, value)


__all__ = ["current_report", "extend_status"]
