"""The service-cluster lifecycle: pods a Kubernetes controller keeps running.

A Mars cluster's supervisors and workers are Deployments: their pods come and go under
the Deployment controller, with names nobody chooses, so the pod-by-pod rules of
:mod:`kubemill.core.reconcile` (create replica N, judge its exit, recreate it) do not
apply. What is left to decide is small, and decided here, in one place for every
substrate that runs such a cluster:

- ``Created`` on the first pass;
- every object of the Plan's :class:`~kubemill.frameworks.ServiceCluster` that is missing
  is created (:class:`~kubemill.core.model.CreateObject`), in the Plan's order, with the
  digest of its body; one whose recorded digest differs (the spec changed: more workers,
  other resources) is rewritten (:class:`~kubemill.core.model.UpdateObject`);
- ``Ready`` is True while every replica type has the ready pods it needs (all the
  supervisors, ``minWorkerNum`` workers), a pod of the web type runs on a node with an IP,
  and the web Service has its node port; the endpoint is then
  ``http://<that node's IP>:<node port>``. Otherwise ``Ready`` is False with the counts.
  A service is never Succeeded (:class:`~kubemill.frameworks.ServicePolicy`'s semantics);
- ``replicaStatuses[type].active`` counts the Running pods, ``readyReplicas`` the ready
  ones.

The endpoint and the ready pods are this lifecycle's neutral record
(:class:`~kubemill.frameworks.ServiceView`): the Plan's status extension writes them into
the kind's own status fields (:func:`~kubemill.frameworks.service_fields` for a status
with ``endpoint`` and ``ready_replicas``), so nothing here names a kind.

A stop request (the ``kubemill.dev/stop`` annotation: ``kubemill interrupt``) fails the
cluster with reason ``Interrupted``, as it fails a job, and scales its Deployments to no
replicas (:attr:`~kubemill.core.model.UpdateObject.stopped`); nothing is created after.
Not decided yet (so not claimed): ``suspend`` (a Mars cluster has none).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubemill.api import STOP_ANNOTATION, ConditionType, Job, ReplicaStatus
from kubemill.core.conditions import ConditionStatus, set_condition
from kubemill.core.lifecycle import INTERRUPTED, ReconcileOptions, refuse_unread
from kubemill.core.model import (
    Action,
    CreateObject,
    Observed,
    ReconcileResult,
    RecordEvent,
    UpdateObject,
    content_digest,
)
from kubemill.core.status_fields import extend_status
from kubemill.frameworks.plan import Plan, ServiceCluster, ServiceView


@dataclass(frozen=True)
class ServiceClusterLifecycle:
    """The service-cluster :class:`~kubemill.core.lifecycle.Lifecycle`: its pods are found
    by the job's label (their ReplicaSets name them)."""

    name: str = "service-cluster"
    pods_by_label: bool = True
    judges_refusals: bool = False

    def reconcile(
        self, job: Job, plan: Plan, observed: Observed, now: datetime, options: ReconcileOptions
    ) -> ReconcileResult:
        del options  # no PodGroup: a controller creates the pods, one by one
        refuse_unread(plan, self.name, "retry", "remote", "reruns")
        return reconcile_service(job, plan, observed, now)


SERVICE_CLUSTER = ServiceClusterLifecycle()
"""The service-cluster lifecycle."""


def reconcile_service(job: Job, plan: Plan, observed: Observed, now: datetime) -> ReconcileResult:
    """Decide for a service cluster (``plan.service_cluster`` set): what to create, and
    whether it is Ready. Pure, idempotent, as :func:`kubemill.core.reconcile`."""
    cluster = plan.service_cluster
    if cluster is None:
        raise ValueError(
            f"{plan.kind} {plan.name}: the service-cluster lifecycle needs the Plan's "
            "service_cluster, and the framework set none"
        )
    status = job.status.model_copy(deep=True)
    kind = job.KIND or plan.kind
    ref = f"{job.namespace}/{job.name}"
    actions: list[Action] = []

    def condition(which: ConditionType, value: ConditionStatus, suffix: str, message: str) -> None:
        before = status.condition(which)
        reason = f"{kind}{suffix}"
        set_condition(status, which, value, reason=reason, message=message, now=now)
        if before is None or before.status != value:  # an event when it turns, not per count
            actions.append(RecordEvent("Normal", reason, message))
        elif before.reason == reason and before.message != message:
            # The same state with other counts: set_condition keeps a condition whose status
            # and reason stand, but a cluster's message says how many pods are ready.
            status.conditions = [
                c.model_copy(update={"message": message, "last_update_time": now})
                if c.type == which
                else c
                for c in status.conditions
            ]

    if status.condition(ConditionType.CREATED) is None:
        condition(ConditionType.CREATED, "True", "Created", f"{kind} {ref} is created.")
    if status.start_time is None:
        status.start_time = now
    stop_request = job.metadata.annotations.get(STOP_ANNOTATION)
    if stop_request is not None and not status.finished:
        why = f": {stop_request}" if stop_request else ""
        message = (
            f"{kind} {ref} was stopped on request ({STOP_ANNOTATION}{why}); its Deployments "
            "were scaled to no replicas."
        )
        status.completion_time = now
        set_condition(
            status, ConditionType.FAILED, "True", reason=INTERRUPTED, message=message, now=now
        )
        actions.append(RecordEvent("Warning", INTERRUPTED, message))
    if status.finished:
        actions += _stop(cluster, observed)
        status.replica_statuses = {}
        extend_status(job, plan, status, observed, service=ServiceView(None, {}))
        return ReconcileResult(actions=tuple(actions), status=status)
    actions += _create_missing(cluster, observed)

    running = dict.fromkeys(cluster.ready_needed, 0)
    ready = dict.fromkeys(cluster.ready_needed, 0)
    hosts: list[str] = []
    for pod in sorted(observed.pods, key=lambda p: p.name):
        if pod.deleting or pod.owner or pod.replica_type not in ready or pod.phase != "Running":
            continue
        running[pod.replica_type] += 1
        if pod.ready:
            ready[pod.replica_type] += 1
            if pod.replica_type == cluster.web_type and pod.host_ip:
                hosts.append(pod.host_ip)
    node_port = dict(observed.node_ports).get(cluster.web_service)
    enough = all(ready[rtype] >= needed for rtype, needed in cluster.ready_needed.items())
    counts = ", ".join(
        f"{ready[rtype]} of {needed} {rtype} replica(s) needed are ready"
        for rtype, needed in cluster.ready_needed.items()
    )
    endpoint = f"http://{hosts[0]}:{node_port}" if enough and hosts and node_port else None
    if endpoint is not None:
        condition(ConditionType.READY, "True", "Ready", f"{kind} {ref} is ready at {endpoint}.")
    else:
        waiting = (
            counts if not enough else f"the {cluster.web_service} service has no node port yet"
        )
        condition(
            ConditionType.READY, "False", "NotReady", f"{kind} {ref} is not ready: {waiting}."
        )
    status.replica_statuses = {
        rtype: ReplicaStatus(active=count) for rtype, count in running.items()
    }
    extend_status(job, plan, status, observed, service=ServiceView(endpoint, ready))
    return ReconcileResult(actions=tuple(actions), status=status)


def stopped_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """The object as a stopped cluster keeps it: a Deployment with no replicas."""
    out = dict(body)
    if out.get("kind") == "Deployment":
        out["spec"] = {**out["spec"], "replicas": 0}
    return out


def _stop(cluster: ServiceCluster, observed: Observed) -> list[Action]:
    """Scale the cluster's Deployments to no replicas (once: the digest records it)."""
    recorded: dict[tuple[str, str], str] = {
        (child.kind, child.name): child.digest for child in observed.children
    }
    actions: list[Action] = []
    for body in cluster.objects:
        kind, name = str(body["kind"]), str(body["metadata"]["name"])
        digest = object_digest(stopped_body(body))
        if kind == "Deployment" and recorded.get((kind, name), digest) != digest:
            actions.append(UpdateObject(kind, name, digest, stopped=True))
            actions.append(
                RecordEvent("Normal", f"SuccessfulUpdate{kind}", f"Scaled {kind} {name} to 0")
            )
    return actions


def object_digest(body: Mapping[str, Any]) -> str:
    """A short, stable digest of an object's body (what the substrate records on it)."""
    return content_digest(body)


def _create_missing(cluster: ServiceCluster, observed: Observed) -> list[Action]:
    recorded: dict[tuple[str, str], str] = {
        (child.kind, child.name): child.digest for child in observed.children
    }
    services = {("Service", name) for name in observed.services}
    actions: list[Action] = []
    for body in cluster.objects:
        kind, name = str(body["kind"]), str(body["metadata"]["name"])
        digest = object_digest(body)
        if (kind, name) in services:
            continue  # a Service's ports and selector never change with the spec
        if (kind, name) not in recorded:
            actions.append(CreateObject(kind, name, digest))
            actions.append(
                RecordEvent("Normal", f"SuccessfulCreate{kind}", f"Created {kind}: {name}")
            )
        elif recorded[kind, name] not in ("", digest):  # "": not ours to judge
            actions.append(UpdateObject(kind, name, digest))
            actions.append(
                RecordEvent("Normal", f"SuccessfulUpdate{kind}", f"Updated {kind}: {name}")
            )
    return actions


__all__ = [
    "SERVICE_CLUSTER",
    "ServiceClusterLifecycle",
    "object_digest",
    "reconcile_service",
    "stopped_body",
]
