"""The pods a job's program creates itself (a Spark driver's executors), found by the label
selector its engine's record gives (:class:`kubemill.engines.base.ChildPods`), each as a
replica view: its phase, start and end, restarts, exit code and address, read through the
shared observation of a pod (:class:`~kubemill.substrates.kubernetes.observe.PodSnapshot`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubemill.substrates.base import ReplicaView
from kubemill.substrates.kubernetes.observe import PodSnapshot, parse_time


def child_view(pod: Mapping[str, Any]) -> ReplicaView:
    """One child pod as the job page shows it (its first container's state)."""
    snapshot = PodSnapshot.of(pod)
    first = snapshot.containers[0] if snapshot.containers else None
    ip = str((pod.get("status") or {}).get("podIP") or "")
    return ReplicaView(
        name=snapshot.name,
        replica_type="pod",
        index=0,
        phase=snapshot.phase,
        exit_code=None if first is None else first.exit_code,
        restarts=sum(c.restart_count for c in snapshot.containers),
        started=parse_time(snapshot.started),
        finished=None if first is None else parse_time(first.finished),
        reason=(first.reason if first is not None else "") or snapshot.reason,
        message=(first.message if first is not None else "") or snapshot.message,
        address=ip,
    )
