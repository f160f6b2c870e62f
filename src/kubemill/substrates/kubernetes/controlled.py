"""A replica that runs through a child controller (``ReplicaPlan.controller``) is a
batch/v1 Job on Kubernetes: how the Job is built from the replica's pod
(:func:`build_controlled`), and how the Job is read back (:class:`ControllerSnapshot`, kept
in the operator's cache; its ``observed_as`` is what the core is told,
its status as it is, never a phase).

The Job has the replica pod's labels and owner reference (the job controls it, so the
garbage collector deletes it with the job), its ``backoffLimit`` is the controller's, and
its pod template is the replica's pod less what only a pod has (its name, namespace and
owner): the Job controller names and owns the pods it makes, so the operator never judges
them as replicas (they are not controlled by the job). A pod that fails is replaced by the
Job controller, so its pods restart ``Never`` unless the replica's template asks
``OnFailure``.
Deleting it deletes its pods too (``propagationPolicy: Background``: a Job's default is to
orphan them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubemill.api import Job
from kubemill.core import ObservedCondition, ObservedController
from kubemill.frameworks import ReplicaPlan
from kubemill.substrates.kubernetes.observe import controller_uid, parse_time

JOB_API_VERSION = "batch/v1"
JOBS = "jobs"
"""The controller's resource: batch/v1 Jobs."""

JOB_DELETION = "Background"
"""How the operator deletes a Job: its pods go with it."""

_POD_ONLY_METADATA = ("name", "namespace", "ownerReferences")


def build_controlled(replica: ReplicaPlan, pod: Mapping[str, Any]) -> dict[str, Any]:
    """The Job that runs ``replica`` (which has a controller), from the replica's pod as
    :func:`~kubemill.substrates.kubernetes.build.build_pod` built it."""
    controller = replica.controller
    assert controller is not None, f"{replica.name} runs through no controller"
    meta = pod["metadata"]
    template_meta = {k: v for k, v in meta.items() if k not in _POD_ONLY_METADATA}
    spec = dict(pod["spec"])
    # The template's own (KubeRay's default template says Never), not the replica's restart
    # policy: that one is what a process does locally, where no Job controller retries it.
    asked = replica.template.spec.restart_policy
    spec["restartPolicy"] = "OnFailure" if asked == "OnFailure" else "Never"
    job_meta: dict[str, Any] = {
        "name": controller.name,
        "namespace": meta["namespace"],
        "labels": dict(meta.get("labels") or {}),
        "ownerReferences": list(meta["ownerReferences"]),
    }
    return {
        "apiVersion": JOB_API_VERSION,
        "kind": "Job",
        "metadata": job_meta,
        "spec": {
            "backoffLimit": controller.backoff_limit,
            "template": {"metadata": template_meta, "spec": spec},
        },
    }


@dataclass(frozen=True)
class ControllerSnapshot:
    """A Job as the operator keeps it in its cache: who controls it and its status."""

    name: str
    uid: str
    owner_uid: str | None
    observed_as: ObservedController

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> ControllerSnapshot:
        meta = body.get("metadata") or {}
        status = body.get("status") or {}
        conditions = tuple(
            ObservedCondition(
                type=str(c.get("type", "")),
                status=str(c.get("status", "")),
                reason=str(c.get("reason") or ""),
                message=str(c.get("message") or ""),
                time=parse_time(c.get("lastTransitionTime")),
            )
            for c in status.get("conditions") or ()
            if isinstance(c, Mapping)
        )
        name, uid = str(meta.get("name", "")), str(meta.get("uid", ""))
        return cls(
            name=name,
            uid=uid,
            owner_uid=controller_uid(meta),
            observed_as=ObservedController(
                name=name,
                active=int(status.get("active") or 0),
                ready=int(status.get("ready") or 0),
                succeeded=int(status.get("succeeded") or 0),
                failed=int(status.get("failed") or 0),
                conditions=conditions,
                created=parse_time(meta.get("creationTimestamp")),
                started=parse_time(status.get("startTime")),
                finished=parse_time(status.get("completionTime")),
                deleting=bool(meta.get("deletionTimestamp")),
                uid=uid,
            ),
        )


def observed_controllers(
    job: Job, snapshots: Iterable[ControllerSnapshot]
) -> tuple[ObservedController, ...]:
    """The Jobs this job controls (by uid, as :func:`~.observe.observe` counts its other
    children: a namesake's leftovers are not adopted), as the core is told of them."""
    uid = job.metadata.uid or ""
    return tuple(
        s.observed_as for s in sorted(snapshots, key=lambda s: s.name) if s.owner_uid == uid
    )


__all__ = [
    "JOBS",
    "JOB_API_VERSION",
    "JOB_DELETION",
    "ControllerSnapshot",
    "build_controlled",
    "observed_controllers",
]
