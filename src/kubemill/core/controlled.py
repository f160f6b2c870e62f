"""Replicas run through a child controller (``ReplicaPlan.controller``): how the core reads
such a replica's state from its controller's status, and when it has failed for good.

On Kubernetes the replica is a batch/v1 Job the substrate created; the substrate reports
the Job's status as it is (:class:`~kubemill.core.model.ObservedController`: counts and
conditions) and :func:`with_controllers` makes it the replica's pod for the pass, so every
rule of the lifecycle (stages, Running, counts, suspend, clean-up) treats it as any other
replica; deleting that "pod" deletes the Job. The phase is the core's reading:

- the ``Failed`` condition: ``Failed`` (the controller gave up), with its reason, message
  and time;
- the ``Complete`` condition: ``Succeeded``;
- a ready pod: ``Running`` and ready; anything else (a pod being created, scheduled, or
  retried after a failure) ``Pending``.

Its failed runs are its ``restart_count``, so the restart books count them as they count
a process's restarts. Locally the replica is a process of the supervisor, reported as a
pod, restarted under its restart policy. One rule on both (:func:`controlled_failure`):
the replica fails for good when its failures exceed its ``backoff_limit``, as the Job
controller's ``backoffLimit`` has it, or when its controller says it gave up; the job then
fails with the controller's ``failure_reason``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from kubemill.core.model import Observed, ObservedController, ObservedPod, PodPhase
from kubemill.frameworks.plan import Plan, ReplicaPlan

FAILED = "Failed"
COMPLETE = "Complete"
"""The conditions of a controller's status the core reads (batch/v1 Job's)."""


def controlled_pod(replica: ReplicaPlan, controller: ObservedController) -> ObservedPod:
    """The replica's pod as the core judges it, read from its controller's status."""
    failed = controller.condition(FAILED)
    complete = controller.condition(COMPLETE)
    phase: PodPhase
    if failed is not None:
        phase = "Failed"
    elif complete is not None:
        phase = "Succeeded"
    elif controller.ready > 0:
        phase = "Running"
    else:
        phase = "Pending"
    finished = None
    if failed is not None:
        finished = failed.time
    elif complete is not None:
        finished = controller.finished or complete.time
    return ObservedPod(
        name=replica.name,
        replica_type=replica.replica_type,
        index=replica.index,
        phase=phase,
        restart_count=controller.failed,
        ready=phase == "Running",
        created=controller.created,
        started=controller.started,
        finished=finished,
        deleting=controller.deleting,
        reason=failed.reason if failed is not None else "",
        message=failed.message if failed is not None else "",
        uid=controller.uid,
    )


def with_controllers(plan: Plan, observed: Observed) -> Observed:
    """``observed`` with the pod of each replica that runs through a controller read from
    that controller's status (a controller of no replica of the Plan is left out: its
    replica is gone from the Plan, and its owner's deletion takes it)."""
    if not observed.controllers:
        return observed
    by_name = {c.name: c for c in observed.controllers}
    pods = list(observed.pods)
    for replica in plan.replicas:
        controller = by_name.get(replica.controller.name) if replica.controller else None
        if controller is not None:
            pods.append(controlled_pod(replica, controller))
    return replace(observed, pods=tuple(sorted(pods, key=lambda p: p.name)))


def controlled_failure(
    plan: Plan, observed: Observed, live: Mapping[str, ObservedPod], restarts: Mapping[str, int]
) -> tuple[str, str] | None:
    """(reason, message) when a replica that runs through a controller has failed for
    good: its controller gave up (its ``Failed`` condition), or its failures (``restarts``,
    the restart books' count by replica type, and a failure not restarted yet) exceed its
    ``backoff_limit``."""
    by_name = {c.name: c for c in observed.controllers}
    for replica in plan.replicas:
        controller = replica.controller
        pod = live.get(replica.name)
        if controller is None or pod is None:
            continue
        seen = by_name.get(controller.name)
        gave_up = seen.condition(FAILED) if seen is not None else None
        if gave_up is not None:
            return controller.failure_reason, (
                f"{replica.replica_type} {controller.name} failed: {gave_up.reason or FAILED}: "
                f"{gave_up.message or 'no message'}"
            )
        failures = restarts.get(replica.replica_type, 0)
        if pod.phase in ("Failed", "Unknown"):
            failures += 1
        if failures > controller.backoff_limit:
            why = f": exit code {pod.exit_code}" if pod.exit_code is not None else ""
            return controller.failure_reason, (
                f"{replica.replica_type} {controller.name} failed {failures} times, more "
                f"than its backoffLimit ({controller.backoff_limit}){why}"
            )
    return None


__all__ = ["COMPLETE", "FAILED", "controlled_failure", "controlled_pod", "with_controllers"]
