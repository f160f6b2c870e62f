"""Replicas as ``kubemill get`` shows them, derived from what the core sees of their pods.

Each pod is read by :mod:`kubemill.substrates.kubernetes.observe`, the module the operator
reads its cache with, into the same :class:`~kubemill.core.ObservedPod` the core judges:
phase, exit code, restarts, times and reason in a :class:`ReplicaView` are that pod's, so
``get`` cannot tell a different story from the job's status. Only display extras come from
the pod besides: the message that goes with the reason, and the address (pod IP and the
framework's port). Replicas without a pod say why there is none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubemill.api import ConditionType, Job
from kubemill.core import ObservedPod
from kubemill.frameworks import Plan, PlanError
from kubemill.kinds import controllers
from kubemill.substrates.base import ReplicaView, SubstrateError
from kubemill.substrates.kubernetes.observe import (
    PodSnapshot,
    main_container_name,
    observed_pod,
    why,
)
from kubemill.substrates.kubernetes.render import plan_on_kubernetes


def job_plan(job: Job) -> Plan:
    """The Plan the operator works from (its replicas, their names and main containers)."""
    try:
        return plan_on_kubernetes(job)
    except PlanError as exc:
        raise SubstrateError(
            f"{job.KIND} {job.namespace}/{job.name} in the cluster cannot be planned: {exc}"
        ) from exc


def _port(job: Job, pod: Mapping[str, Any], container: str) -> int | None:
    for c in (pod.get("spec") or {}).get("containers") or ():
        if c.get("name") == container:
            for port in c.get("ports") or ():
                if port.get("name") == job.DEFAULT_PORT_NAME and port.get("containerPort"):
                    return int(port["containerPort"])
    return None


def view_of(observed: ObservedPod, *, message: str = "", address: str = "") -> ReplicaView:
    """A replica view that says what the core sees of the pod, and nothing else."""
    return ReplicaView(
        name=observed.name,
        replica_type=observed.replica_type,
        index=observed.index,
        phase=observed.phase,
        exit_code=observed.exit_code,
        restarts=observed.restart_count,
        started=observed.started,
        finished=observed.finished,
        reason=observed.reason,
        message=message or ("the pod is being deleted" if observed.deleting else ""),
        address=address,
    )


def pod_view(job: Job, plan: Plan, pod: Mapping[str, Any]) -> ReplicaView:
    """One replica as ``get`` shows it, from its pod."""
    snapshot = PodSnapshot.of(pod)
    container = main_container_name(job, plan, snapshot)
    _, message = why(snapshot, snapshot.container(container))
    ip = str((pod.get("status") or {}).get("podIP") or "")
    port = _port(job, pod, container)
    return view_of(
        observed_pod(job, plan, snapshot),
        message=message,
        address=f"{ip}:{port}" if ip and port else ip,
    )


def missing_view(job: Job, replica_type: str, index: int, name: str) -> ReplicaView:
    """A replica without a pod, and why it has none."""
    if job.status.finished:
        reason, phase = "PodDeleted", "Unknown"
        message = "the job has finished and its pod is gone (cleanPodPolicy or by hand)"
    elif job.status.is_true(ConditionType.SUSPENDED):
        reason, phase, message = "Suspended", "Pending", "the job is suspended"
    else:
        reason, phase = "NoPod", "Pending"
        message = "the operator has not created its pod yet"
    return ReplicaView(name, replica_type, index, phase=phase, reason=reason, message=message)


def replica_views(
    job: Job, pods: Iterable[Mapping[str, Any]], *, plan: Plan | None = None
) -> tuple[ReplicaView, ...]:
    """Every replica of the Plan in start order, then pods it no longer asks for (scaled
    down), by name. None for a controller kind (a schedule): its runs are
    jobs of their own."""
    if plan is None and job.KIND in {c.kind for c in controllers()}:
        return ()
    plan = plan if plan is not None else job_plan(job)
    by_name = {str((p.get("metadata") or {}).get("name")): p for p in pods}
    views = []
    for replica in plan.replicas:
        pod = by_name.pop(replica.name, None)
        if pod is None:
            views.append(missing_view(job, replica.replica_type, replica.index, replica.name))
        else:
            views.append(pod_view(job, plan, pod))
    views.extend(pod_view(job, plan, pod) for _, pod in sorted(by_name.items()))
    return tuple(views)


def replica_names(plan: Plan) -> list[str]:
    """The pod name of every replica of the Plan, in start order."""
    return [replica.name for replica in plan.replicas]


def _short(job_name: str, replica: str) -> str:
    return replica[len(job_name) + 1 :] if replica.startswith(job_name + "-") else replica


def pick_replica(job_name: str, names: list[str], wanted: str) -> str:
    """The pod that ``wanted`` (``worker-1`` or the pod's name) means among ``names``."""
    key = wanted.lower()
    for name in names:
        if key in (name.lower(), _short(job_name, name).lower()):
            return name
    known = ", ".join(_short(job_name, n) for n in names)
    raise SubstrateError(f"job {job_name} has no replica {wanted!r} (its replicas: {known})")
