"""Asking the core for a verdict on a local job whose supervisor loop cannot (or did not).

Every outcome of a local job comes out of :func:`kubemill.core.reconcile`, also when
no supervisor loop is there to call it:

- a reader (``kubemill get`` in another shell) finds the supervisor gone: it reports
  what the records say of the replicas (those that were running are *lost*: phase
  ``Unknown``, reason ``SupervisorLost``) plus a :class:`~kubemill.core.Halt`;
- the supervisor cannot start the job here (``NotRunnableLocally``) or its own loop
  failed (``SupervisorError``): a ``Halt`` too.

This module builds those observations and the Plan to judge them against; the callers
store the status and the events the core returns. Nothing here decides an outcome.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from kubemill.api import Job
from kubemill.core import ObservedPod, ReconcileResult, RecordEvent
from kubemill.core.model import PodPhase
from kubemill.frameworks import Plan, SuccessPolicy
from kubemill.substrates.base import SubstrateError
from kubemill.substrates.local.network import LocalNetwork, local_plan
from kubemill.substrates.local.store import ReplicaRecord, Store

SUPERVISOR_LOST = "SupervisorLost"
"""The reason of a replica (and, through the core, of a job) whose supervisor died."""

_POD_PHASES: frozenset[str] = frozenset({"Pending", "Running", "Succeeded", "Failed", "Unknown"})


def _utc(moment: float | None) -> datetime | None:
    return None if moment is None else datetime.fromtimestamp(moment, UTC)


def recorded_plan(job: Job, ports: dict[tuple[str, int], int], *, files_root: str = "") -> Plan:
    """The local Plan of a recorded job with its reserved ports.

    A job whose Plan cannot be built at all (the reason it cannot run here) is judged
    against a Plan without replicas: the core still records the verdict it is given.
    """
    try:
        network = LocalNetwork(job.name, ports=ports, files_root=files_root)
        return local_plan(job, network)
    except (ValueError, SubstrateError):  # PlanError, UnknownKind, a port or path missing
        return Plan(
            kind=job.KIND,
            name=job.name,
            namespace=job.namespace,
            replicas=(),
            outcome=SuccessPolicy(replica_type="", require="first"),
            services=False,
        )


def observed_records(records: Iterable[ReplicaRecord], *, lost: bool) -> tuple[ObservedPod, ...]:
    """The replicas as their records last saw them.

    Replicas never created, and those kubemill already stopped (``Stopped``: the core
    deleted their pods), are not there. With ``lost``, a replica recorded as running
    has lost its supervisor: phase ``Unknown`` (a lost node's pods look the same on a
    cluster) with reason ``SupervisorLost``.
    """
    pods = []
    for r in records:
        if r.created is None or r.phase not in _POD_PHASES:
            continue
        phase: PodPhase = r.phase  # type: ignore[assignment]  # checked just above
        reason = r.reason
        if lost and phase in ("Running", "Pending"):
            phase, reason = "Unknown", SUPERVISOR_LOST
        pods.append(
            ObservedPod(
                name=r.name,
                replica_type=r.replica_type,
                index=r.index,
                phase=phase,
                exit_code=r.exit_code,
                restart_count=r.restart_count,
                created=_utc(r.created),
                started=_utc(r.started),
                finished=_utc(r.finished),
                reason=reason,
                uid=f"{r.name}@{r.created}",
            )
        )
    return tuple(pods)


def record_events(store: Store, uid: str, result: ReconcileResult, *, when: float) -> None:
    """The core's events of one pass, into the events table."""
    for action in result.actions:
        if isinstance(action, RecordEvent):
            store.add_event(
                uid, type=action.type, reason=action.reason, message=action.message, when=when
            )


__all__ = ["SUPERVISOR_LOST", "observed_records", "record_events", "recorded_plan"]
