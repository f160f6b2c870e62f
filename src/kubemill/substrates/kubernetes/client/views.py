"""Replicas as ``kubemill get`` shows them, derived from what the core sees of their pods.

Each pod is read by :mod:`kubemill.substrates.kubernetes.observe`, the module the operator
reads its cache with, into the same :class:`~kubemill.core.ObservedPod` the core judges:
phase, exit code, restarts, times and reason in a :class:`ReplicaView` are that pod's, so
``get`` cannot tell a different story from the job's status. Only display extras come from
the pod besides: the message that goes with the reason, and the address (pod IP and the
framework's port). Replicas without a pod say why there is none.

A replica run through a child controller (``ReplicaPlan.controller``) is a batch/v1 Job
the job controls, whose pods the Job controller makes (and owns): it is shown as the core
judges it, from the Job's status (:func:`~kubemill.core.controlled.controlled_pod`), with
the address of the Job's newest pod (:class:`ControlledRun`); the Job's pods are never
rows of their own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubemill.api import ConditionType, Job
from kubemill.core import ObservedController, ObservedPod, controlled_pod
from kubemill.frameworks import Plan, PlanError, ReplicaPlan
from kubemill.kinds import controllers
from kubemill.substrates.base import ReplicaView, SubstrateError
from kubemill.substrates.kubernetes.controlled import ControllerSnapshot, observed_controllers
from kubemill.substrates.kubernetes.observe import (
    PodSnapshot,
    controller_uid,
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


def plan_of(job: Job) -> Plan | None:
    """The job's Plan, None for a controller kind (a schedule): its runs are jobs of their
    own, it has no replicas."""
    if job.KIND in {c.kind for c in controllers()}:
        return None
    return job_plan(job)


def has_controlled(plan: Plan | None) -> bool:
    """Whether some replica of the Plan runs through a child controller."""
    return plan is not None and any(r.controller is not None for r in plan.replicas)


@dataclass(frozen=True)
class ControlledRun:
    """A batch/v1 Job a replica runs through, as the client found it: its status as the
    core is told it, and its newest pod (None before the Job controller made one). The
    Job's older pods are earlier attempts it retried; the replica is its newest."""

    observed: ObservedController
    pod: Mapping[str, Any] | None = None


def controlled_runs(
    job: Job, jobs: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]
) -> dict[str, ControlledRun]:
    """The Jobs ``job`` controls (by owner uid, as the operator counts them), by name, each
    with its newest pod among ``pods`` (those its controller uid says the Job made)."""
    observed = observed_controllers(job, (ControllerSnapshot.of(j) for j in jobs))
    newest: dict[str, Mapping[str, Any]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        owner = controller_uid(meta)
        if owner is None:
            continue
        seen = newest.get(owner)
        if seen is None or _age_key(pod) > _age_key(seen):
            newest[owner] = pod
    return {c.name: ControlledRun(c, newest.get(c.uid)) for c in observed}


def _age_key(pod: Mapping[str, Any]) -> tuple[str, str]:
    # RFC 3339 times in UTC sort as text; the name breaks a tie within the same second.
    meta = pod.get("metadata") or {}
    return str(meta.get("creationTimestamp") or ""), str(meta.get("name") or "")


@dataclass(frozen=True)
class ReplicaPods:
    """What ``get`` and ``logs`` read a job's replicas from: the pods it controls, and the
    Jobs its replicas with a child controller run through (by the Job's name; empty for a
    Plan without such replicas: they are not even asked for)."""

    pods: tuple[Mapping[str, Any], ...] = ()
    controlled: Mapping[str, ControlledRun] = field(default_factory=dict)
    plan: Plan | None = None
    """The Plan they were read for, when it was made already (saves planning twice)."""


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


def _address(job: Job, pod: Mapping[str, Any], container: str) -> str:
    ip = str((pod.get("status") or {}).get("podIP") or "")
    port = _port(job, pod, container)
    return f"{ip}:{port}" if ip and port else ip


def pod_view(job: Job, plan: Plan, pod: Mapping[str, Any]) -> ReplicaView:
    """One replica as ``get`` shows it, from its pod."""
    snapshot = PodSnapshot.of(pod)
    container = main_container_name(job, plan, snapshot)
    _, message = why(snapshot, snapshot.container(container))
    return view_of(
        observed_pod(job, plan, snapshot),
        message=message,
        address=_address(job, pod, container),
    )


def controlled_view(job: Job, replica: ReplicaPlan, run: ControlledRun) -> ReplicaView:
    """A replica run through a Job as ``get`` shows it: as the core reads it from the
    Job's status (the operator's reading, so ``get`` and the status agree), at the address
    of the Job's newest pod."""
    observed = controlled_pod(replica, run.observed)
    address = "" if run.pod is None else _address(job, run.pod, replica.container)
    return view_of(observed, message=observed.message, address=address)


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
    job: Job,
    pods: Iterable[Mapping[str, Any]],
    *,
    plan: Plan | None = None,
    controlled: Mapping[str, ControlledRun] | None = None,
) -> tuple[ReplicaView, ...]:
    """Every replica of the Plan in start order, then pods it no longer asks for (scaled
    down), by name. None for a controller kind (a schedule): its runs are
    jobs of their own. ``pods`` are the pods the job controls; a replica with a child
    controller is read from its Job in ``controlled`` (by the Job's name)."""
    if plan is None and job.KIND in {c.kind for c in controllers()}:
        return ()
    plan = plan if plan is not None else job_plan(job)
    runs = controlled or {}
    by_name = {str((p.get("metadata") or {}).get("name")): p for p in pods}
    views = []
    for replica in plan.replicas:
        pod = by_name.pop(replica.name, None)
        run = runs.get(replica.controller.name) if replica.controller is not None else None
        if run is not None:
            views.append(controlled_view(job, replica, run))
        elif pod is None:
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
