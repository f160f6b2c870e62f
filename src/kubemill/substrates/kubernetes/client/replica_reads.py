"""What the SDK reads a job's replicas from: the pods it controls and, for a Plan with a
replica run through a child controller only, the batch/v1 Jobs it controls with the pods
those Jobs made (one pod list serves both: a Job's pods carry the job's label, from its
template). One job (``get``, ``wait``, ``logs``) or every job of a listing at once (``list``:
one pod list, and one Job list when some Plan needs it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubemill.frameworks import LABEL_JOB_NAME
from kubemill.substrates.kubernetes.client.connection import Http
from kubemill.substrates.kubernetes.client.errors import Request
from kubemill.substrates.kubernetes.client.kinds import Found
from kubemill.substrates.kubernetes.client.views import (
    ControlledRun,
    ReplicaPods,
    controlled_runs,
    has_controlled,
    plan_of,
)
from kubemill.substrates.kubernetes.controlled import JOB_API_VERSION, JOBS
from kubemill.substrates.kubernetes.observe import controller_uid
from kubemill.substrates.kubernetes.transport import api_path


def list_pods(http: Http, namespace: str | None, selector: str) -> list[dict[str, Any]]:
    """The pods with these labels (every namespace when ``namespace`` is None)."""
    request = Request("list", "pods", "", namespace)
    path = api_path(group="", version="v1", plural="pods", namespace=namespace)
    answer = http.json(request, "GET", path, query=[("labelSelector", selector)])
    return [dict(p) for p in answer.get("items") or ()]


def list_jobs(http: Http, namespace: str | None, selector: str) -> list[dict[str, Any]]:
    """The batch/v1 Jobs with these labels (replicas run through a child controller)."""
    request = Request("list", JOBS, "batch", namespace)
    group, _, version = JOB_API_VERSION.partition("/")
    path = api_path(group=group, version=version, plural=JOBS, namespace=namespace)
    answer = http.json(request, "GET", path, query=[("labelSelector", selector)])
    return [dict(j) for j in answer.get("items") or ()]


def job_pods(http: Http, found: Found) -> list[dict[str, Any]]:
    """The pods the job controls (a namesake's leftovers do not count)."""
    pods = list_pods(http, found.namespace, f"{LABEL_JOB_NAME}={found.name}")
    return [p for p in pods if controller_uid(p.get("metadata") or {}) == found.uid]


def replica_pods(http: Http, found: Found) -> ReplicaPods:
    """What one job's replicas are read from (Jobs by owner uid, as the operator counts them)."""
    plan = plan_of(found.job())
    selector = f"{LABEL_JOB_NAME}={found.name}"
    listed = list_pods(http, found.namespace, selector)
    own = tuple(p for p in listed if controller_uid(p.get("metadata") or {}) == found.uid)
    controlled: dict[str, ControlledRun] = {}
    if has_controlled(plan):
        jobs = list_jobs(http, found.namespace, selector)
        controlled = controlled_runs(found.job(), jobs, listed)
    return ReplicaPods(own, controlled, plan)


def listed_replica_pods(
    http: Http, namespace: str | None, objects: Iterable[Found]
) -> dict[str, ReplicaPods]:
    """What each of ``objects`` (jobs of one listing) reads its replicas from, by uid."""
    objects = list(objects)
    if not objects:
        return {}
    pods_by_owner = _by_owner(list_pods(http, namespace, LABEL_JOB_NAME))
    plans = {f.uid: plan_of(f.job()) for f in objects}
    jobs_by_owner: dict[str, list[dict[str, Any]]] = {}
    if any(has_controlled(plan) for plan in plans.values()):
        jobs_by_owner = _by_owner(list_jobs(http, namespace, LABEL_JOB_NAME))
    seen = {}
    for f in objects:
        controlled: dict[str, ControlledRun] = {}
        if has_controlled(plans[f.uid]):
            jobs = jobs_by_owner.get(f.uid, [])
            made = [p for j in jobs for p in pods_by_owner.get(_uid(j), ())]
            controlled = controlled_runs(f.job(), jobs, made)
        seen[f.uid] = ReplicaPods(tuple(pods_by_owner.get(f.uid, ())), controlled, plans[f.uid])
    return seen


def _by_owner(bodies: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for body in bodies:
        owner = controller_uid(body.get("metadata") or {})
        if owner:
            grouped.setdefault(owner, []).append(body)
    return grouped


def _uid(body: Mapping[str, Any]) -> str:
    return str((body.get("metadata") or {}).get("uid") or "")


__all__ = ["job_pods", "list_jobs", "list_pods", "listed_replica_pods", "replica_pods"]
