"""Scaling a RayCluster's worker group (``kubemill scale``, ``JobClient.scale``): the JSON
merge patch that sets one group's ``replicas``, the engine's ``Engine.scale``.

A merge patch replaces a list whole, so the patch carries every group as the cluster has it,
the named one with its new count. ``minReplicas`` and ``maxReplicas`` are the bounds of an
autoscaler kubemill refuses; the one in the way widens to take the count in (``kubemill
cluster create ray --workers 2`` sets both to 2), so asking for a count is enough.
"""

from __future__ import annotations

from typing import Any

from kubemill.api import FieldError, Job, ManifestError
from kubemill.engines.ray.api.raycluster import RayCluster

GROUPS = "spec.workerGroupSpecs"


def worker_group_patch(job: Job, group: str | None, replicas: int) -> dict[str, Any]:
    """The merge patch that gives ``group`` (None: the cluster's only one) ``replicas``
    workers; :class:`ManifestError` naming the groups there are for another."""
    if not isinstance(job, RayCluster):
        raise ManifestError([FieldError("kind", f"a {job.KIND} has no worker group to scale")])
    groups = [g.to_wire() for g in job.spec.worker_group_specs]
    names = [g["groupName"] for g in groups]
    if group is None and len(names) == 1:
        group = names[0]
    if group not in names:
        asked = "no group was named" if group is None else f"no worker group {group!r}"
        hint = f"name one of: {', '.join(names)}" if names else "add a worker group first"
        raise ManifestError([FieldError(GROUPS, f"{job.name}: {asked}", hint)])
    found = groups[names.index(group)]
    found["replicas"] = replicas
    if found.get("maxReplicas") is not None and found["maxReplicas"] < replicas:
        found["maxReplicas"] = replicas
    if found.get("minReplicas") is not None and found["minReplicas"] > replicas:
        found["minReplicas"] = replicas
    return {"spec": {"workerGroupSpecs": groups}}


__all__ = ["worker_group_patch"]
