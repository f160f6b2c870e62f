"""What the dashboard shows of a job, worked out from the SDK's records.

Everything here is a pure function of a :class:`~kubemill.substrates.base.JobView` (and
its events): the jobs table's row, the job page's conditions, replicas and manifest. The
pages (:mod:`.pages`) turn these into HTML; the server (:mod:`.server`) only fetches the
records through :class:`~kubemill.sdk.JobClient` and hands them over, so the first paint
and every live update come out of the same functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubemill.api import GROUP, Job, ManifestError
from kubemill.kinds import entry_for, is_controller, load_one
from kubemill.sdk.client import is_service
from kubemill.sdk.summary import (
    endpoint,
    ready_replicas,
    restarts,
    runs_no_pods,
    state_of,
    total_replicas,
    web_ui,
)
from kubemill.substrates.base import EventRecord, JobView, ReplicaView


@dataclass(frozen=True)
class Link:
    """Where a job can be reached from outside: a service cluster's endpoint, a web UI."""

    label: str
    url: str


@dataclass(frozen=True)
class JobRow:
    """One line of the jobs table."""

    namespace: str
    name: str
    reference: str
    """What the job's page is found by (:func:`job_reference`)."""
    key: str
    """Which row of the table is the job's (:func:`job_key`)."""
    kind: str
    state: str
    created: datetime | None
    started: datetime | None
    ended: datetime | None
    replicas: str
    """``ready/total``; ``-`` for a schedule (its runs are jobs of their own)."""
    restarts: str
    link: Link | None


def link_of(view: JobView) -> Link | None:
    """A service cluster's endpoint (``status.endpoint``) or a Spark driver's web UI."""
    if served := endpoint(view):
        return Link("endpoint", served)
    if ui := web_ui(view):
        return Link("Spark UI", ui)
    return None


def job_reference(view: JobView) -> str:
    """The name the SDK finds the job by, as ``get`` takes it, qualified as with kubectl:
    ``KIND/NAME`` in kubemill's group (``tfjob/seed``), ``PLURAL.GROUP/NAME`` in an upstream
    one (read from a cluster whose operator serves ``--serve-upstream-groups``).

    Never the bare name, although ``get`` takes it (and a typed or kept ``/jobs/NS/NAME``
    opens): on Kubernetes two kinds may each hold a job of that name (``get`` then asks which),
    a bare name of ours would open ours before an upstream job of the same name, and finding
    a bare name costs a request to every kind of kubemill's group, on every read of the job
    page and its stream, where a qualified one costs one."""
    if in_our_group(view):
        return f"{view.kind.lower()}/{view.name}"
    return f"{_resource(view)}/{view.name}"


def job_key(view: JobView) -> str:
    """Which row of the jobs table is the job's: its namespace, resource and name, so that
    jobs sharing a name in different kinds or groups are rows of their own."""
    return f"{view.namespace}/{_resource(view)}/{view.name}"


def in_our_group(view: JobView) -> bool:
    """Whether the job is of kubemill's group (not an upstream one's, as Kubeflow's)."""
    return _group(view) == GROUP


def _group(view: JobView) -> str:
    return view.job.api_version.partition("/")[0]


def _resource(view: JobView) -> str:
    """``PLURAL.GROUP`` of the job's kind (``tfjobs.kubeflow.org``)."""
    return f"{entry_for(view.kind).api.plural}.{_group(view)}"


def job_row(view: JobView) -> JobRow:
    """The job as one line of the jobs table."""
    schedule = runs_no_pods(view)
    return JobRow(
        namespace=view.namespace,
        name=view.name,
        reference=job_reference(view),
        key=job_key(view),
        kind=view.kind,
        state=state_of(view),
        created=view.created or view.status.start_time,
        started=view.status.start_time,
        ended=view.status.completion_time,
        replicas="-" if schedule else f"{ready_replicas(view)}/{total_replicas(view)}",
        restarts="-" if schedule else str(restarts(view)),
        link=link_of(view),
    )


def suspended(view: JobView) -> bool:
    """Whether the job (or a controller's object: its run policy says whether it starts
    runs) is asked to be suspended now."""
    return bool(view.job.run_policy.suspend) or view.phase == "Suspended"


def actions_for(view: JobView) -> frozenset[str]:
    """The actions that can apply to the job now, as the SDK would accept them: a finished
    job can only be deleted; a service cluster (it serves until stopped) has no suspend."""
    if view.finished:
        return frozenset({"delete"})
    allowed = {"interrupt", "delete"}
    if not is_service(view.kind):
        allowed.add("resume" if suspended(view) else "suspend")
    return frozenset(allowed)


def runs_of_schedule(view: JobView, others: Sequence[JobView]) -> list[JobView]:
    """A schedule's runs among ``others``: the jobs whose owner reference names it."""
    if not runs_no_pods(view):
        return []
    runs = []
    for other in others:
        owners = other.job.metadata.owner_references or []
        if other.namespace == view.namespace and any(
            ref.name == view.name and ref.kind == view.kind for ref in owners
        ):
            runs.append(other)
    return runs


def job_object(view: JobView) -> dict[str, Any]:
    """The job as Kubernetes would return it: its spec plus the status observed now."""
    obj = view.job.to_wire()
    obj.pop("status", None)  # put last, after the spec, as kubectl prints it
    obj["status"] = view.status.to_wire()
    if view.created is not None:
        obj.setdefault("metadata", {}).setdefault("creationTimestamp", iso(view.created))
    return obj


def operator_objects(job: Job) -> tuple[list[dict[str, Any]], str]:
    """What the operator creates for ``job`` as it starts, Secret values left out exactly as
    ``kubemill render`` leaves them out; or no objects and the reason none can be shown.

    A suspended job is rendered as it would start once resumed: the page shows what the
    job is made of, not that nothing exists while it is suspended.
    """
    from kubemill.substrates.kubernetes.build import UnsupportedPlanError
    from kubemill.substrates.kubernetes.render import RenderError, render_job

    # As submitted, without the status it has now: a finished job's status would have the
    # reconcile create nothing.
    wire = job.to_wire()
    wire.pop("status", None)
    try:
        fresh = load_one(wire, name=f"{job.KIND} {job.name}")
        # A controller's run policy is its spec's, read only (it creates jobs, not pods).
        if not is_controller(fresh.kind) and fresh.run_policy.suspend:
            fresh.run_policy.suspend = False
        # show_secrets stays False: nothing on this page may carry a key or a token.
        objects = render_job(fresh, show_secrets=False)
    except (UnsupportedPlanError, RenderError, ValueError) as exc:
        # ValueError covers a ManifestError and a PlanError: a job the operator could not
        # take as it is recorded (a plugin's kind gone, a local-only option).
        return [], f"What the operator would create cannot be shown: {exc}"
    return objects, "" if objects else "The operator creates nothing for this job."


def manifest_problems(exc: ManifestError) -> list[dict[str, str]]:
    """The loader's errors, one per field path, as the submit form lists them."""
    return [
        {"path": e.path or "<document>", "message": e.message, "hint": e.hint, "source": e.source}
        for e in exc.errors
    ]


def iso(moment: datetime | None, *, precise: bool = False) -> str:
    """An RFC 3339 time in UTC (``2026-12-02T10:42:28Z``; ``precise``: with milliseconds,
    for what is drawn to scale), "" for none."""
    if moment is None:
        return ""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    spec = "milliseconds" if precise else "seconds"
    return moment.astimezone(UTC).isoformat(timespec=spec).replace("+00:00", "Z")


def replica_sort_key(replica: ReplicaView) -> tuple[str, int]:
    return (replica.replica_type, replica.index)


def events_newest_last(events: Sequence[EventRecord]) -> list[EventRecord]:
    return sorted(events, key=lambda e: e.time)


__all__ = [
    "JobRow",
    "Link",
    "actions_for",
    "events_newest_last",
    "in_our_group",
    "iso",
    "job_key",
    "job_object",
    "job_reference",
    "job_row",
    "link_of",
    "manifest_problems",
    "operator_objects",
    "replica_sort_key",
    "runs_of_schedule",
    "suspended",
]
