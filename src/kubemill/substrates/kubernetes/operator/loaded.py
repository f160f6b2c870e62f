"""The jobs the operator has loaded and planned lately, kept by resourceVersion.

A resourceVersion names one content of an object, so a pass over the same version of a job
(its children's events come close together) neither validates nor plans it again. Only the
most recently reconciled are kept: a job's model and plan are ~20 KiB, too much to keep for
every job.
"""

from __future__ import annotations

from collections import OrderedDict

from kubemill.api import Job
from kubemill.frameworks import Plan
from kubemill.substrates.kubernetes.operator.caches import JobKey

LOADED_JOBS = 128
"""How many jobs' loaded manifest and plan are kept (the most recently reconciled)."""


class LoadedJobs:
    """job -> (resourceVersion, job, plan) of the last pass that loaded it as stored."""

    def __init__(self, limit: int | None = None) -> None:
        self._limit = limit
        """How many to keep; None: :data:`LOADED_JOBS` as it is when a job is kept."""
        self._loaded: OrderedDict[JobKey, tuple[str, Job, Plan]] = OrderedDict()

    def get(self, key: JobKey, rv: str | None) -> tuple[Job, Plan] | None:
        """The job and plan loaded at version ``rv``, if kept (None for no version)."""
        loaded = self._loaded.get(key)
        if rv and loaded is not None and loaded[0] == rv:
            self._loaded.move_to_end(key)
            return loaded[1], loaded[2]
        self._loaded.pop(key, None)
        return None

    def keep(self, key: JobKey, rv: str | None, job: Job, plan: Plan) -> None:
        """Remember what version ``rv`` loaded as (nothing without a version)."""
        if not rv:
            return
        self._loaded[key] = (rv, job, plan)
        if len(self._loaded) > (LOADED_JOBS if self._limit is None else self._limit):
            self._loaded.popitem(last=False)

    def forget(self, key: JobKey) -> None:
        self._loaded.pop(key, None)

    def forget_all(self, keys: list[JobKey]) -> list[JobKey]:
        """Forget each of ``keys`` (what they name changed); returns them."""
        for key in keys:
            self._loaded.pop(key, None)
        return keys

    def __len__(self) -> int:
        return len(self._loaded)


__all__ = ["LOADED_JOBS", "LoadedJobs"]
