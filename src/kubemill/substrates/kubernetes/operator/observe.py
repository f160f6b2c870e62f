"""What the operator keeps of the objects it watches, and how that becomes :class:`Observed`.

kopf indexes (the operator's informer cache) hold small frozen snapshots of each pod,
service and PodGroup a job owns, not whole bodies: they are compared on every event (kopf
skips an index update when the value is equal) and they are all the core needs. Pure
functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from kubemill.api import Job
from kubemill.core import Observed, ObservedPod, ObservedPodGroup, PodPhase
from kubemill.frameworks import LABEL_JOB_NAME, LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE, Plan

_PHASES: frozenset[str] = frozenset({"Pending", "Running", "Succeeded", "Failed", "Unknown"})


def controller_uid(meta: Mapping[str, Any]) -> str | None:
    """The uid of the object's controlling owner (``ownerReferences[].controller``)."""
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller"):
            return str(ref.get("uid") or "") or None
    return None


@dataclass(frozen=True)
class ContainerSnapshot:
    """One container's status, as the kubelet reports it."""

    name: str
    restart_count: int = 0
    exit_code: int | None = None
    """Exit code of the current run if it has terminated, else of the last terminated run."""
    running: bool = False
    finished: str | None = None
    reason: str = ""


@dataclass(frozen=True)
class PodSnapshot:
    """A pod as the reconcile needs it."""

    name: str
    uid: str
    owner_uid: str | None
    replica_type: str
    """The ``kubemill.dev/replica-type`` label (lowercased type)."""
    index: int | None
    phase: str
    ready: bool = False
    created: str | None = None
    started: str | None = None
    deleting: bool = False
    reason: str = ""
    containers: tuple[ContainerSnapshot, ...] = ()

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> PodSnapshot:
        meta = body.get("metadata", {})
        status = body.get("status") or {}
        labels = meta.get("labels") or {}
        raw_index = labels.get(LABEL_REPLICA_INDEX)
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or ()
        )
        return cls(
            name=str(meta.get("name", "")),
            uid=str(meta.get("uid", "")),
            owner_uid=controller_uid(meta),
            replica_type=str(labels.get(LABEL_REPLICA_TYPE, "")),
            index=int(raw_index) if raw_index is not None and str(raw_index).isdigit() else None,
            phase=str(status.get("phase") or "Pending"),
            ready=ready,
            created=meta.get("creationTimestamp"),
            started=status.get("startTime"),
            deleting=bool(meta.get("deletionTimestamp")),
            reason=_pod_reason(status),
            containers=tuple(
                _container(c)
                for c in (status.get("containerStatuses") or ())
                if isinstance(c, Mapping)
            ),
        )


def _pod_reason(status: Mapping[str, Any]) -> str:
    if status.get("reason"):
        return str(status["reason"])  # Evicted, DeadlineExceeded, ...
    for cond in status.get("conditions") or ():
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return str(cond.get("reason") or "Unschedulable")
    return ""


def _container(raw: Mapping[str, Any]) -> ContainerSnapshot:
    state = raw.get("state") or {}
    last = raw.get("lastState") or {}
    terminated = state.get("terminated") or last.get("terminated") or {}
    waiting = state.get("waiting") or {}
    exit_code = terminated.get("exitCode")
    return ContainerSnapshot(
        name=str(raw.get("name", "")),
        restart_count=int(raw.get("restartCount") or 0),
        exit_code=int(exit_code) if exit_code is not None else None,
        running="running" in state,
        finished=terminated.get("finishedAt"),
        reason=str((state.get("terminated") or {}).get("reason") or waiting.get("reason") or ""),
    )


@dataclass(frozen=True)
class ChildSnapshot:
    """A service or PodGroup: its name, who controls it and (PodGroups) its phase."""

    name: str
    uid: str
    owner_uid: str | None
    phase: str = ""

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> ChildSnapshot:
        meta = body.get("metadata", {})
        status = body.get("status") or {}
        return cls(
            name=str(meta.get("name", "")),
            uid=str(meta.get("uid", "")),
            owner_uid=controller_uid(meta),
            phase=str(status.get("phase") or "") if isinstance(status, Mapping) else "",
        )


def job_key_of_child(body: Mapping[str, Any]) -> str | None:
    """The job a child belongs to, by its ``kubemill.dev/job-name`` label."""
    labels = body.get("metadata", {}).get("labels") or {}
    name = labels.get(LABEL_JOB_NAME)
    return str(name) if name else None


def _time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _canonical_type(job: Job, label: str) -> str:
    for rtype in job.replica_specs:
        if rtype.lower() == label.lower():
            return rtype
    for rtype in job.REPLICA_TYPES:
        if rtype.lower() == label.lower():
            return rtype
    return label


def observed_pod(job: Job, plan: Plan, pod: PodSnapshot) -> ObservedPod:
    """One pod as the core sees it: the main container's exit code, restarts and times."""
    try:
        replica = plan.replica(pod.name)
        replica_type, index, container_name = replica.replica_type, replica.index, replica.container
    except KeyError:  # a stray (scaled down, renamed type): judged by its labels
        replica_type = _canonical_type(job, pod.replica_type)
        index = pod.index if pod.index is not None else -1
        container_name = job.DEFAULT_CONTAINER
    main = next((c for c in pod.containers if c.name == container_name), None)
    phase = pod.phase if pod.phase in _PHASES else "Unknown"
    exit_code = None
    if main is not None and (phase in ("Succeeded", "Failed") or not main.running):
        exit_code = main.exit_code
    return ObservedPod(
        name=pod.name,
        replica_type=replica_type,
        index=index,
        phase=cast(PodPhase, phase),
        exit_code=exit_code,
        restart_count=main.restart_count if main is not None else 0,
        ready=pod.ready,
        created=_time(pod.created),
        started=_time(pod.started),
        finished=_time(main.finished) if main is not None else None,
        deleting=pod.deleting,
        reason=pod.reason or (main.reason if main is not None else ""),
        uid=pod.uid,
    )


def observe(
    job: Job,
    plan: Plan,
    *,
    pods: Iterable[PodSnapshot],
    services: Iterable[ChildSnapshot],
    pod_group: ChildSnapshot | None,
    deleting: Mapping[str, str] | None = None,
) -> Observed:
    """What the job owns, from the caches.

    Only children whose controller is this job (by uid) count: a namesake job's leftovers or
    an object someone else created with the same labels are not adopted. ``deleting`` names
    pods (name -> uid) the operator has deleted but whose deletion the cache has not shown
    yet; they are reported as deleting, as the core's contract asks.
    """
    uid = job.metadata.uid or ""
    deleting = deleting or {}
    observed_pods = []
    for pod in pods:
        if pod.owner_uid != uid:
            continue
        snapshot = pod
        if deleting.get(pod.name) == pod.uid and not pod.deleting:
            snapshot = PodSnapshot(**{**pod.__dict__, "deleting": True})
        observed_pods.append(observed_pod(job, plan, snapshot))
    group = None
    if pod_group is not None and pod_group.owner_uid == uid:
        group = ObservedPodGroup(name=pod_group.name, phase=pod_group.phase)
    return Observed(
        pods=tuple(sorted(observed_pods, key=lambda p: p.name)),
        services=frozenset(s.name for s in services if s.owner_uid == uid),
        pod_group=group,
    )
