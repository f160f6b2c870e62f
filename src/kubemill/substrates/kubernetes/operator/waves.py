"""The order in which a pass creates a job's children (:func:`creation_wave`: what others
name must exist first), which child an action creates, and what a replica's pod actions
name (:func:`replica_ref`: its pod, or the Job of a replica with a child controller).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from kubemill.core import (
    Action,
    ChildKind,
    CreateChild,
    CreateObject,
    CreatePod,
    CreatePodGroup,
    CreateService,
    WriteFiles,
)
from kubemill.frameworks import Plan
from kubemill.substrates.kubernetes.build import CHILD_RESOURCES
from kubemill.substrates.kubernetes.controlled import JOB_API_VERSION, JOB_DELETION, JOBS
from kubemill.substrates.kubernetes.operator.kubeapi import ObjectRef


def creation_wave(action: Action) -> int:
    """The order in which a pass's actions may run, lowest first; one wave runs at once.

    What others need must exist first, or the API server refuses them: a pod names its
    PodGroup and its ServiceAccount (the ServiceAccount admission plugin refuses a pod whose
    account does not exist yet), and a RoleBinding names its Role (the RBAC escalation check
    of a creator without ``bind`` looks the Role up, and answers 404 while it is missing).
    """
    if isinstance(action, CreatePodGroup):
        return 0
    # A job's access objects, or a service cluster's objects built whole (Mars's Role).
    kind = action.kind if isinstance(action, CreateChild | CreateObject) else None
    if kind in ("ServiceAccount", "Role"):
        return 0
    if kind == "RoleBinding":
        return 1
    return 2


def created_child(action: Action) -> tuple[str, str] | None:
    """(kind, name) of the child an action creates (None for anything else)."""
    if isinstance(action, CreatePod):
        return "Pod", action.name
    if isinstance(action, CreateService):
        return "Service", action.name
    if isinstance(action, CreatePodGroup):
        return "PodGroup", action.name
    if isinstance(action, WriteFiles) and not action.update:
        return ("Secret" if action.secret else "ConfigMap"), action.name
    if isinstance(action, CreateChild):
        return action.kind, action.name
    return None


def object_resource(body: Mapping[str, Any]) -> tuple[str, str]:
    """(apiVersion, plural) of a service cluster's object."""
    if body["kind"] == "Service":
        return "v1", "services"
    return CHILD_RESOURCES[cast(ChildKind, body["kind"])]


def child_ref(kind: ChildKind, namespace: str, name: str) -> ObjectRef:
    api_version, plural = CHILD_RESOURCES[kind]
    return ObjectRef(api_version, plural, namespace, name)


def replica_ref(plan: Plan, namespace: str, name: str) -> tuple[ObjectRef, tuple[str, str], str]:
    """What ``CreatePod``/``DeletePod`` of the replica ``name`` create or delete: (the
    object, its key in the reconciler's expectations, the deletion's propagation). A
    replica with a child controller is its Job (deleted with its pods); any other, or a
    pod no longer in the Plan, its pod."""
    replica = next((r for r in plan.replicas if r.name == name), None)
    controller = replica.controller if replica is not None else None
    if controller is not None:
        ref = ObjectRef(JOB_API_VERSION, JOBS, namespace, controller.name)
        return ref, ("controller", controller.name), JOB_DELETION
    return ObjectRef("v1", "pods", namespace, name), ("pod", name), ""
