"""Jobs that refer to other jobs, in the operator (an engine's
:class:`~kubemill.engines.base.References`: a Ray job's existing cluster).

Before every planning of such a job the reconcile resolves what it names from the caches it
already keeps (:func:`resolved`): the job referred to, loaded with its status from its
resource's cache, and the pod IPs of its Running and ready pods, which the engine makes of
it what its Plan needs. Nothing is read from the API server and nothing new is watched:
the kinds referred to are the operator's own, listed and watched already, so no grant is
added. When such a job changes, every cached job of its namespace that names it is
reconciled again (:meth:`Referrers.of`), as jobs are when a training runtime changes.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubemill.api import Job
from kubemill.engines.base import References, Referred
from kubemill.kinds import engine_for, is_controller, load_document
from kubemill.substrates.kubernetes.observe import PodSnapshot
from kubemill.substrates.kubernetes.operator.caches import Caches, JobKey
from kubemill.substrates.kubernetes.operator.settings import JobResource

Resources = Mapping[tuple[str, str], JobResource]


def resolved(job: Job, caches: Caches, resources: Resources) -> Job:
    """``job`` with what it refers to resolved from the caches (itself when its engine
    refers to nothing, or it names nothing)."""
    refers = engine_for(job.KIND).refers
    if refers is None:
        return job
    namespace = job.namespace

    def lookup(name: str) -> Referred | None:
        for resource in resources.values():
            if resource.kind != refers.kind:
                continue
            raw = caches.job((resource.group, resource.plural, namespace, name))
            if raw is None:
                continue
            found, _ = load_document(raw)
            if found is None:
                return None  # not valid: its own reconcile reports why
            pods: list[PodSnapshot] = caches.children("pods", (namespace, name))
            addresses = {
                pod.name: pod.pod_ip
                for pod in pods
                if pod.phase == "Running" and pod.ready and pod.pod_ip and not pod.deleting
            }
            return Referred(found, addresses)
        return None

    return refers.resolve(job, lookup)


class Referrers:
    """Which cached jobs name a job (:meth:`of`), for the reconciler: the served resources
    whose engine's jobs name a kind are fixed once the operator serves its resources, so
    they are found once a kind, not at every event of a job (an engine lookup for each
    served resource)."""

    def __init__(self, caches: Caches, resources: Resources) -> None:
        self._caches = caches
        self._resources = resources
        self._referring: dict[str, list[tuple[str, str, References]]] = {}
        """kind -> (group, plural, how its jobs refer) of each resource whose jobs name it."""

    def _referring_to(self, kind: str) -> list[tuple[str, str, References]]:
        found = self._referring.get(kind)
        if found is None:
            found = self._referring[kind] = [
                (group, plural, refers)
                for (group, plural), resource in self._resources.items()
                if not is_controller(resource.kind)
                and (refers := engine_for(resource.kind).refers) is not None
                and refers.kind == kind
            ]
        return found

    def of(self, kind: str, key: JobKey) -> list[JobKey]:
        """The cached jobs that name the job ``key`` (of ``kind``) in its namespace."""
        namespace, name = key[2], key[3]
        found: list[JobKey] = []
        for group, plural, refers in self._referring_to(kind):
            for other in list(self._caches.jobs):
                if other[:3] != (group, plural, namespace):
                    continue
                raw = self._caches.job(other)
                if raw is not None and name in refers.names(raw):
                    found.append(other)
        return found


__all__ = ["Referrers", "resolved"]
