"""How a pod on a cluster becomes an :class:`~kubemill.core.ObservedPod`: one set of rules.

Both sides of the Kubernetes substrate read pods through this module, so ``kubemill get``
shows what the core judged:

- the operator keeps :class:`PodSnapshot` values in its kopf indexes (its informer cache)
  and turns them into :class:`~kubemill.core.Observed` with :func:`observe`;
- the client (``JobClient(substrate="kubernetes")``) takes the same snapshot of each pod it
  lists and derives its replica views from :func:`observed_pod` (plus display-only extras:
  the pod's address, and :func:`why`'s message next to the reason).

A snapshot is small and frozen: kopf compares index values on every event and skips equal
ones. The rules, for the replica's main container (the Plan's, i.e. the framework's
``tensorflow``/``pytorch`` container; never a sidecar):

- ``phase`` is the pod's phase (anything else becomes ``Unknown``);
- ``exit_code`` is the main container's last exit, once it is not running (terminated now,
  or waiting to be restarted in place after it terminated); ``None`` while it runs and when
  it never ran (an evicted pod, an init container that failed);
- ``started`` is when the container's current run started (else the pod's ``startTime``),
  ``finished`` when the run ``exit_code`` describes finished;
- ``reason`` is the pod's own (``Evicted``, ``NodeLost``, ``DeadlineExceeded``), else why it
  is not scheduled, else an init container's failure as kubectl shows it (``Init:Error``,
  ``Init:CrashLoopBackOff``), else the main container's current state's (``OOMKilled``,
  ``CrashLoopBackOff``, ``ImagePullBackOff``); :func:`why` pairs it with its message;
- ``deleting`` is set by a ``deletionTimestamp`` (Terminating).

Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, cast

from kubemill.api import Job
from kubemill.core import (
    ChildKind,
    Observed,
    ObservedChild,
    ObservedPod,
    ObservedPodGroup,
    PodPhase,
)
from kubemill.frameworks import LABEL_JOB_NAME, LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE, Plan

CONTENT_DIGEST_ANNOTATION = "kubemill.dev/content-digest"
"""On a ConfigMap or Secret of delivered files: the digest of the content the core asked for,
read back to tell whether the content changed (see :class:`kubemill.core.WriteFiles`)."""

_PHASES: frozenset[str] = frozenset({"Pending", "Running", "Succeeded", "Failed", "Unknown"})
_INIT_PENDING = frozenset({"", "PodInitializing"})
"""Waiting reasons of an init container that mean nothing went wrong (yet)."""


def controller_uid(meta: Mapping[str, Any]) -> str | None:
    """The uid of the object's controlling owner (``ownerReferences[].controller``)."""
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller"):
            return str(ref.get("uid") or "") or None
    return None


def parse_time(value: Any) -> datetime | None:
    """An API timestamp (RFC 3339) as an aware datetime; ``None`` for none or garbage."""
    if not value or not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class ContainerSnapshot:
    """One container's status, as the kubelet reports it."""

    name: str
    restart_count: int = 0
    exit_code: int | None = None
    """Exit code of the current run if it has terminated, else of the last terminated run."""
    running: bool = False
    started: str | None = None
    """When the current run started (``state.running`` or ``state.terminated``)."""
    finished: str | None = None
    """When the run ``exit_code`` belongs to finished."""
    reason: str = ""
    """The current state's reason (terminated or waiting)."""
    message: str = ""
    """The current state's message, for people."""

    @property
    def has_run(self) -> bool:
        """Whether a process ran (or runs) in it, so there is a log to read."""
        return self.running or self.exit_code is not None


@dataclass(frozen=True)
class PodSnapshot:
    """A pod as the reconcile (and ``kubemill get``) needs it."""

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
    """Why, from the pod as a whole (see :func:`_pod_why`); a container's reason is kept
    with the container."""
    message: str = ""
    containers: tuple[ContainerSnapshot, ...] = ()
    host_ip: str = ""
    """The node's IP (``status.hostIP``): where a NodePort service of the pod answers."""
    pod_ip: str = ""
    """The pod's own IP (``status.podIP``): where a service in the pod answers the operator."""

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> PodSnapshot:
        meta = body.get("metadata") or {}
        status = body.get("status") or {}
        labels = meta.get("labels") or {}
        raw_index = labels.get(LABEL_REPLICA_INDEX)
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or ()
        )
        reason, message = _pod_why(status)
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
            reason=reason,
            message=message,
            containers=tuple(
                _container(c)
                for c in (status.get("containerStatuses") or ())
                if isinstance(c, Mapping)
            ),
            host_ip=str(status.get("hostIP") or ""),
            pod_ip=str(status.get("podIP") or ""),
        )

    def container(self, name: str) -> ContainerSnapshot | None:
        """The status of the container ``name`` (``None`` before the kubelet reports it)."""
        return next((c for c in self.containers if c.name == name), None)


def _pod_why(status: Mapping[str, Any]) -> tuple[str, str]:
    """(reason, message) that concern the pod as a whole rather than its main container."""
    if status.get("reason"):
        # Evicted, NodeLost, DeadlineExceeded, ...
        return str(status["reason"]), str(status.get("message") or "")
    for cond in status.get("conditions") or ():
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return str(cond.get("reason") or "Unschedulable"), str(cond.get("message") or "")
    # An init container that fails keeps the main container "PodInitializing" for ever;
    # say what is wrong instead, as kubectl does.
    for raw in status.get("initContainerStatuses") or ():
        if not isinstance(raw, Mapping):
            continue
        state = raw.get("state") or {}
        waiting = state.get("waiting") or {}
        terminated = state.get("terminated") or {}
        if waiting and str(waiting.get("reason") or "") not in _INIT_PENDING:
            return f"Init:{waiting['reason']}", str(waiting.get("message") or "")
        if terminated and terminated.get("exitCode") not in (0, None):
            reason = terminated.get("reason") or "Error"
            return f"Init:{reason}", str(terminated.get("message") or "")
    return "", ""


def _container(raw: Mapping[str, Any]) -> ContainerSnapshot:
    state = raw.get("state") or {}
    last = raw.get("lastState") or {}
    current = state.get("terminated") or {}
    running = state.get("running")
    waiting = state.get("waiting") or {}
    terminated = current or last.get("terminated") or {}
    exit_code = terminated.get("exitCode")
    now = current or waiting
    return ContainerSnapshot(
        name=str(raw.get("name", "")),
        restart_count=int(raw.get("restartCount") or 0),
        exit_code=int(exit_code) if exit_code is not None else None,
        running=running is not None,
        started=(running or {}).get("startedAt") or current.get("startedAt"),
        finished=terminated.get("finishedAt"),
        reason=str(now.get("reason") or ""),
        message=str(now.get("message") or ""),
    )


@dataclass(frozen=True)
class ChildSnapshot:
    """A service, PodGroup, ConfigMap, Secret or access object: its name, who controls it,
    (PodGroups) its phase, (delivered files) the content digest the operator recorded."""

    name: str
    uid: str
    owner_uid: str | None
    phase: str = ""
    digest: str = ""
    resource_version: str = ""
    node_port: int | None = None
    """A NodePort service's first node port, once allocated."""
    cluster_ip: str = ""
    """A service's cluster IP, once the API server allocated it ("" for a headless one)."""

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> ChildSnapshot:
        meta = body.get("metadata", {})
        status = body.get("status") or {}
        annotations = meta.get("annotations") or {}
        spec = body.get("spec")
        ports = (spec.get("ports") or []) if isinstance(spec, Mapping) else []
        first = ports[0] if ports and isinstance(ports[0], Mapping) else {}
        cluster_ip = spec.get("clusterIP") if isinstance(spec, Mapping) else None
        return cls(
            node_port=int(first["nodePort"]) if first.get("nodePort") else None,
            cluster_ip=str(cluster_ip) if cluster_ip and cluster_ip != "None" else "",
            name=str(meta.get("name", "")),
            uid=str(meta.get("uid", "")),
            owner_uid=controller_uid(meta),
            phase=str(status.get("phase") or "") if isinstance(status, Mapping) else "",
            digest=str(annotations.get(CONTENT_DIGEST_ANNOTATION, "")),
            resource_version=str(meta.get("resourceVersion", "")),
        )


def job_key_of_child(body: Mapping[str, Any]) -> str | None:
    """The job a child belongs to, by its ``kubemill.dev/job-name`` label."""
    labels = body.get("metadata", {}).get("labels") or {}
    name = labels.get(LABEL_JOB_NAME)
    return str(name) if name else None


def canonical_type(job: Job, label: str) -> str:
    """The spec's spelling of a ``kubemill.dev/replica-type`` label (``worker`` -> ``Worker``)."""
    for rtype in (*job.replica_specs, *job.REPLICA_TYPES):
        if rtype.lower() == label.lower():
            return rtype
    return label


@dataclass(frozen=True)
class _Slot:
    replica_type: str
    index: int
    container: str


def _slot(job: Job, plan: Plan, pod: PodSnapshot) -> _Slot:
    try:
        replica = plan.replica(pod.name)
    except KeyError:  # a stray (scaled down, renamed type): judged by its labels
        return _Slot(
            canonical_type(job, pod.replica_type),
            pod.index if pod.index is not None else -1,
            job.DEFAULT_CONTAINER,
        )
    return _Slot(replica.replica_type, replica.index, replica.container)


def main_container_name(job: Job, plan: Plan, pod: PodSnapshot) -> str:
    """The name of the replica's framework container (``tensorflow``, ``pytorch``, ...)."""
    return _slot(job, plan, pod).container


def main_container(job: Job, plan: Plan, pod: PodSnapshot) -> ContainerSnapshot | None:
    """The status of the replica's framework container (``None`` before it is reported)."""
    return pod.container(main_container_name(job, plan, pod))


def why(pod: PodSnapshot, main: ContainerSnapshot | None) -> tuple[str, str]:
    """(reason, message): the pod's own if it has one, else its main container's."""
    if pod.reason:
        return pod.reason, pod.message
    if main is not None:
        return main.reason, main.message
    return "", ""


def observed_pod(job: Job, plan: Plan, pod: PodSnapshot) -> ObservedPod:
    """One pod as the core sees it: the main container's exit code, restarts and times."""
    slot = _slot(job, plan, pod)
    main = pod.container(slot.container)
    phase = pod.phase if pod.phase in _PHASES else "Unknown"
    exit_code = finished = None
    if main is not None and (phase in ("Succeeded", "Failed") or not main.running):
        exit_code = main.exit_code
        finished = parse_time(main.finished) if exit_code is not None else None
    started = main.started if main is not None and main.started else pod.started
    return ObservedPod(
        name=pod.name,
        replica_type=slot.replica_type,
        index=slot.index,
        phase=cast(PodPhase, phase),
        exit_code=exit_code,
        restart_count=main.restart_count if main is not None else 0,
        ready=pod.ready,
        created=parse_time(pod.created),
        started=parse_time(started),
        finished=finished,
        deleting=pod.deleting,
        reason=why(pod, main)[0],
        # A failed run's terminated.message (the log's tail with FallbackToLogsOnError).
        # Only of a Failed pod: a container waiting to restart has a back-off message.
        message=main.message if main is not None and phase == "Failed" and exit_code else "",
        uid=pod.uid,
    )


def observe_service(
    job: Job,
    plan: Plan,
    *,
    pods: Iterable[PodSnapshot],
    services: Iterable[ChildSnapshot],
    children: Mapping[ChildKind, Iterable[ChildSnapshot]] | None = None,
) -> Observed:
    """What a service cluster (Mars's Deployments) has, from the caches.

    Its objects count when this job controls them (as in :func:`observe`); its pods belong
    to the Deployments' ReplicaSets, so they count by the job's label alone, with the
    replica type their role label gives and their node's IP. NodePort services report
    their node ports.
    """
    base = observe(job, plan, pods=(), services=services, pod_group=None, children=children)
    uid = job.metadata.uid or ""
    observed_pods = tuple(
        replace(observed_pod(job, plan, pod), host_ip=pod.host_ip)
        for pod in sorted(pods, key=lambda p: p.name)
        if pod.owner_uid != uid
    )
    node_ports = tuple(
        (s.name, s.node_port)
        for s in sorted(services, key=lambda s: s.name)
        if s.owner_uid == uid and s.node_port is not None
    )
    return replace(base, pods=observed_pods, node_ports=node_ports)


def observe(
    job: Job,
    plan: Plan,
    *,
    pods: Iterable[PodSnapshot],
    services: Iterable[ChildSnapshot],
    pod_group: ChildSnapshot | None,
    deleting: Mapping[str, str] | None = None,
    children: Mapping[ChildKind, Iterable[ChildSnapshot]] | None = None,
) -> Observed:
    """What the job owns, from the caches.

    Only children whose controller is this job (by uid) count: a namesake job's leftovers or
    an object someone else created with the same labels are not adopted. The exception are
    *foreign* pods, controlled by one of the job's own pods (a Spark driver's executors):
    they are reported with that pod's name as ``owner``, for the core to count. ``deleting``
    names pods (name -> uid) the operator has deleted but whose deletion the cache has not
    shown yet; they are reported as deleting, as the core's contract asks. ``children`` are
    the job's ConfigMaps, Secrets and access objects by kind, with their recorded digests.
    Services report their cluster IPs once allocated (a Spark UI's address is made of one).
    """
    uid = job.metadata.uid or ""
    deleting = deleting or {}
    own = [pod for pod in pods if pod.owner_uid == uid]
    owners = {pod.uid: pod.name for pod in own}
    observed_pods = []
    for pod in own:
        snapshot = pod
        if deleting.get(pod.name) == pod.uid and not pod.deleting:
            snapshot = replace(pod, deleting=True)
        observed_pods.append(observed_pod(job, plan, snapshot))
    for pod in pods:
        if pod.owner_uid is not None and pod.owner_uid in owners:
            foreign = observed_pod(job, plan, pod)
            observed_pods.append(replace(foreign, owner=owners[pod.owner_uid]))
    group = None
    if pod_group is not None and pod_group.owner_uid == uid:
        group = ObservedPodGroup(name=pod_group.name, phase=pod_group.phase)
    observed_children = tuple(
        ObservedChild(kind, child.name, child.digest)
        for kind, snapshots in sorted((children or {}).items())
        for child in sorted(snapshots, key=lambda c: c.name)
        if child.owner_uid == uid
    )
    services = [s for s in services if s.owner_uid == uid]
    return Observed(
        pods=tuple(sorted(observed_pods, key=lambda p: p.name)),
        services=frozenset(s.name for s in services),
        pod_group=group,
        children=observed_children,
        cluster_ips=tuple(
            (s.name, s.cluster_ip) for s in sorted(services, key=lambda s: s.name) if s.cluster_ip
        ),
    )
