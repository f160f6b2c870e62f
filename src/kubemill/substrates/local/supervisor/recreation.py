"""The restart books of a replica created again (:func:`recreated_record`).

A pod's in-place restarts are gone with the pod, so when the supervisor creates a replica
that ran before (the core recreated a failed pod, a suspended job resumed, a group scaled
up again), what its earlier incarnation counted moves into ``retired_restarts``, as the
core keeps ``ReplicaStatus.retired_restarts`` on Kubernetes.
"""

from __future__ import annotations

from dataclasses import replace

from kubemill.substrates.local.kubelet import STOPPED_WAITING, ReplicaPod
from kubemill.substrates.local.store import ReplicaRecord


def recreated_record(record: ReplicaRecord, existing: ReplicaPod | None) -> ReplicaRecord:
    """``record`` of a replica about to be created again, its earlier pod ``existing``
    (None once dropped): its restarts so far retired, the new incarnation's at 0.

    The earlier incarnation's in-place restarts stay counted, plus this recreation -- unless
    kubemill stopped it while it ran, or it had succeeded (suspended, then resumed): as in
    the core, only a failed pod created again is a restart.
    """
    earlier = existing.state.restart_count if existing is not None else record.restart_count
    # A pod deleted while it waited to restart has that restart counted already.
    waited = (
        existing.interrupted_restart
        if existing is not None
        else record.message.startswith(STOPPED_WAITING)
    )
    recreation = 1 if record.phase == "Failed" and not waited else 0
    retired = record.retired_restarts + earlier + recreation
    return replace(record, retired_restarts=retired, restart_count=0)


__all__ = ["recreated_record"]
