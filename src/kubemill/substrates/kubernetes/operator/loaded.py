"""The jobs the operator has loaded and planned lately, kept by resourceVersion.

A resourceVersion names one content of an object, so a pass over the same version of a job
(its children's events come close together) neither validates nor plans it again. Only the
most recently reconciled are kept: a job's model and plan are ~30 KiB, too much to keep for
every job.

The operator's own status write makes a new version that differs from the one it read by
the status alone (the write is made at the version read: :meth:`LoadedJobs.status_written`).
The next pass loads the job of that version (its status is the one written, as the server
merged it) but keeps the plan: a Plan is made of a job's spec and metadata, never of its
status (what an engine derives from the status it reads at each pass, through the
StatusView or the references resolved anew), so planning again would give the same plan.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from kubemill.api import Job
from kubemill.frameworks import Plan, PlanError
from kubemill.kinds import load_document
from kubemill.substrates.kubernetes.operator.caches import JobKey
from kubemill.substrates.kubernetes.render import plan_on_kubernetes

LOADED_JOBS = 32
"""How many jobs' loaded manifest and plan are kept (the most recently reconciled): a pass
at the same version comes soon after the last or not at all. ``bench/operator_throughput.py``
500 x 4 on the real control plane: 1031 loads in 1137 passes with 32 kept, 1036 in 1153
with 128 (~32 KiB each: 3 MiB of resident memory). What it costs: the plan kept for the
version of a status write (:meth:`LoadedJobs.status_written`) outlives a burst's other
first passes less often; on the test API server (faster than the real one) 980 plans for
500 jobs with 32, 823 with 64, 500 with 128; on the real one 985 with 64, 1036 with 128."""


class LoadedJobs:
    """job -> (resourceVersion, job, plan) of the last pass that loaded it as stored (no job
    yet: the version the operator's own status write made, whose plan is kept)."""

    def __init__(self, limit: int | None = None) -> None:
        self._limit = limit
        """How many to keep; None: :data:`LOADED_JOBS` as it is when a job is kept."""
        self._loaded: OrderedDict[JobKey, tuple[str, Job | None, Plan]] = OrderedDict()

    def get(self, key: JobKey, rv: str | None) -> tuple[Job, Plan] | None:
        """The job and plan loaded at version ``rv``, if kept (None for no version)."""
        loaded = self._loaded.get(key)
        if rv and loaded is not None and loaded[0] == rv and loaded[1] is not None:
            self._loaded.move_to_end(key)
            return loaded[1], loaded[2]
        if loaded is None or loaded[1] is not None or loaded[0] != rv:
            self._loaded.pop(key, None)
        return None

    def status_written(self, key: JobKey, read: str, written: str) -> None:
        """The operator's status write made version ``written`` of the job from version
        ``read`` (a merge patch of the status at that version): the plan of ``read``, if
        kept, is that of ``written`` (see the module's docstring); its job is loaded anew."""
        loaded = self._loaded.get(key)
        if loaded is not None and loaded[0] == read and written:
            self._loaded[key] = (written, None, loaded[2])
            self._loaded.move_to_end(key)

    def load(
        self, key: JobKey, raw: Mapping[str, Any], rv: str | None, refer: Callable[[Job], Job]
    ) -> tuple[Job, Plan] | str:
        """The job ``raw`` holds and its plan (kept by version ``rv``), planned again on the
        jobs it refers to as ``refer`` resolves them now (the caches change under a version
        of the job); the problem, when the job or its plan is invalid."""
        loaded = self.get(key, rv)
        try:
            if loaded is None:
                job, errors = load_document(raw)
                if job is None:
                    return "; ".join(str(e) for e in errors)
                kept = self._loaded.get(key)  # a plan alone: the version our write made
                plan = kept[2] if kept is not None and rv and kept[0] == rv else None
                loaded = job, plan or plan_on_kubernetes(job)
                self.keep(key, rv, *loaded)
            found = refer(loaded[0])
            return loaded if found is loaded[0] else (found, plan_on_kubernetes(found))
        except PlanError as exc:
            return str(exc)

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
