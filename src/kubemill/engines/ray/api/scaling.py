"""Scaling a RayCluster's worker group (``kubemill scale``, ``JobClient.scale``): the JSON
patch (RFC 6902) that sets one group's ``replicas``, the engine's ``Engine.scale``.

``workerGroupSpecs`` is a list, and a merge patch replaces a list whole: it would have to
carry every group as kubemill's model has it, dropping whatever the stored object has
beyond the model. The JSON patch touches the one group's counts only, at its index, after
a ``test`` that the index still holds the group (``groupName``): were the groups reordered
meanwhile, the patch fails whole rather than scale another group. ``minReplicas`` and
``maxReplicas`` are the bounds of an autoscaler kubemill refuses; the one in the way widens
to take the count in (``kubemill cluster create ray --workers 2`` sets both to 2), so
asking for a count is enough. Counts are written with ``add``, which sets an object's
member whether or not it is there (a manifest may leave ``replicas`` to its default).
"""

from __future__ import annotations

from typing import Any

from kubemill.api import FieldError, Job, ManifestError
from kubemill.engines.ray.api.raycluster import RayCluster

GROUPS = "spec.workerGroupSpecs"


def worker_group_patch(job: Job, group: str | None, replicas: int) -> list[dict[str, Any]]:
    """The JSON patch that gives ``group`` (None: the cluster's only one) ``replicas``
    workers; :class:`ManifestError` naming the groups there are for another."""
    if not isinstance(job, RayCluster):
        raise ManifestError([FieldError("kind", f"a {job.KIND} has no worker group to scale")])
    groups = job.spec.worker_group_specs
    names = [g.group_name for g in groups]
    if group is None and len(names) == 1:
        group = names[0]
    if group not in names:
        asked = "no group was named" if group is None else f"no worker group {group!r}"
        hint = f"name one of: {', '.join(names)}" if names else "add a worker group first"
        raise ManifestError([FieldError(GROUPS, f"{job.name}: {asked}", hint)])
    index = names.index(group)
    found = groups[index]
    at = f"/spec/workerGroupSpecs/{index}"
    patch: list[dict[str, Any]] = [
        {"op": "test", "path": f"{at}/groupName", "value": group},
        {"op": "add", "path": f"{at}/replicas", "value": replicas},
    ]
    if found.max_replicas is not None and found.max_replicas < replicas:
        patch.append({"op": "add", "path": f"{at}/maxReplicas", "value": replicas})
    if found.min_replicas is not None and found.min_replicas > replicas:
        patch.append({"op": "add", "path": f"{at}/minReplicas", "value": replicas})
    return patch


__all__ = ["worker_group_patch"]
