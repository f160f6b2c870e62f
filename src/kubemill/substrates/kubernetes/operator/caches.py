"""The kopf indexes a reconcile reads (:class:`Caches`), and the keys of a job and of its
children in them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubemill.core import ChildKind
from kubemill.substrates.kubernetes.observe import ChildSnapshot, PodSnapshot

JobKey = tuple[str, str, str, str]
"""(group, plural, namespace, name) of a job."""
ChildKey = tuple[str, str]
"""(namespace, job name): how the child caches are keyed."""


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

    def job(self, key: JobKey) -> Mapping[str, Any] | None:
        if key not in self.jobs:
            return None
        return next(iter(self.jobs[key]), None)

    def children(self, which: str, key: ChildKey) -> list[Any]:
        index: Mapping[ChildKey, Iterable[Any]] = getattr(self, which)
        return list(index[key]) if key in index else []

    def owned(self, key: ChildKey) -> dict[ChildKind, list[ChildSnapshot]]:
        """The job's files and access objects in the cache, by kind."""
        return {
            kind: list(index[key]) for kind, index in self.files_and_access.items() if key in index
        }
