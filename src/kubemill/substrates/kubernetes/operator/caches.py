"""The kopf indexes a reconcile reads (:class:`Caches`), the keys of a job and of its
children in them, and what of a job body is kept (:func:`cached_job`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubemill.core import ChildKind, ObservedProgress
from kubemill.substrates.kubernetes.controlled import ControllerSnapshot
from kubemill.substrates.kubernetes.observe import ChildSnapshot, PodSnapshot

JobKey = tuple[str, str, str, str]
"""(group, plural, namespace, name) of a job."""
ChildKey = tuple[str, str]
"""(namespace, job name): how the child caches are keyed."""


def cached_job(body: Mapping[str, Any]) -> dict[str, Any]:
    """A job as the operator keeps it (its cache, its last status write's answer): the body
    less ``metadata.managedFields``, the API server's record of which client wrote which
    field, often the larger part of the metadata, that nothing in the operator reads; every
    key of it the one string of that text (:func:`sys.intern`). A parsed answer has its own
    copy of each key (``json`` shares them within one document only): a third of a kept
    job (500 x 4: ~1.6 of ~5 KiB a job), for a walk of ~10 us."""
    job: dict[str, Any] = {}
    for key, value in body.items():
        if key == "metadata" and isinstance(value, Mapping):
            value = {k: v for k, v in value.items() if k != "managedFields"}
        job[sys.intern(key)] = _shared_keys(value)
    return job


def _shared_keys(value: Any) -> Any:
    """``value`` with every mapping's keys interned (JSON's keys are strings)."""
    if isinstance(value, Mapping):
        return {sys.intern(str(k)): _shared_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shared_keys(v) for v in value]
    return value


@dataclass(frozen=True)
class Caches:
    """The kopf indexes the reconcile reads (kopf keeps them current from its watches)."""

    jobs: Mapping[JobKey, Iterable[Mapping[str, Any]]]
    pods: Mapping[ChildKey, Iterable[PodSnapshot]]
    services: Mapping[ChildKey, Iterable[ChildSnapshot]]
    pod_groups: Mapping[ChildKey, Iterable[ChildSnapshot]]
    files_and_access: Mapping[ChildKind, Mapping[ChildKey, Iterable[ChildSnapshot]]] = field(
        default_factory=dict
    )
    """Delivered files and per-job access, by kind (only the kinds the operator watches)."""
    progress: Mapping[JobKey, Mapping[str, ObservedProgress]] = field(default_factory=dict)
    """Each replica's latest progress report by job, as the progress endpoint took them
    (:mod:`.progress`): what the pods said, read like what the watches say."""
    controllers: Mapping[ChildKey, Iterable[ControllerSnapshot]] = field(default_factory=dict)
    """The batch/v1 Jobs that run replicas with a child controller (when watched)."""

    def job(self, key: JobKey) -> Mapping[str, Any] | None:
        if key not in self.jobs:
            return None
        return next(iter(self.jobs[key]), None)

    def children(self, which: str, key: ChildKey) -> list[Any]:
        index: Mapping[ChildKey, Iterable[Any]] = getattr(self, which)
        return list(index[key]) if key in index else []

    def progress_of(self, key: JobKey) -> tuple[ObservedProgress, ...]:
        """The job's replicas' latest progress reports, by pod name."""
        reports = self.progress.get(key)
        return tuple(r for _, r in sorted(reports.items())) if reports else ()

    def owned(self, key: ChildKey) -> dict[ChildKind, list[ChildSnapshot]]:
        """The job's files and access objects in the cache, by kind."""
        return {
            kind: list(index[key]) for kind, index in self.files_and_access.items() if key in index
        }
