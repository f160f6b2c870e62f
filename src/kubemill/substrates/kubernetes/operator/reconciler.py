"""One reconcile of one job: caches -> :func:`kubemill.core.reconcile` -> API writes.

Level-triggered and idempotent: a pass reads the job and its children from the kopf
indexes (never from the events that woke it), asks the core what to do and does it. A pass
on an unchanged world writes nothing: children are created only when missing, and the
status is patched (through the status subresource, as a JSON merge patch of the fields that
changed) only when it differs from the recorded one.

The caches lag behind the operator's own writes, so the reconciler keeps *expectations*, as
Kubernetes' own controllers do (:class:`~.memory.JobMemory`, which says how).

A creation the API refuses for good (403, 422, ...) is retried with backoff, except for a
job whose lifecycle judges refusals (a Spark application's, run again as a whole): there it
is a failed submission, the core's to judge. The reconciler remembers the refusal and reports it
(``Observed.refused``) until the core asks for that child again, and writes the status.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from kubemill.api import Job, JobStatus
from kubemill.core import (
    Action,
    ChildKind,
    CreateChild,
    CreateObject,
    CreatePod,
    CreatePodGroup,
    CreateService,
    DeleteChild,
    DeleteJob,
    DeletePod,
    DeletePodGroup,
    DeleteService,
    ReconcileResult,
    RecordEvent,
    Refusal,
    UpdateObject,
    WriteFiles,
    reconcile,
)
from kubemill.frameworks import LABEL_JOB_NAME, Plan
from kubemill.kinds import lifecycle_for
from kubemill.substrates.kubernetes.build import (
    GangScheduler,
    Owner,
    UnsupportedPlanError,
    build_for_action,
)
from kubemill.substrates.kubernetes.controlled import ControllerSnapshot, observed_controllers
from kubemill.substrates.kubernetes.observe import (
    ChildSnapshot,
    PodSnapshot,
    observe,
    observe_service,
)
from kubemill.substrates.kubernetes.operator.caches import Caches, JobKey, cached_job
from kubemill.substrates.kubernetes.operator.kubeapi import (
    ApiError,
    KubeApi,
    ObjectRef,
    Outcome,
    classify,
)
from kubemill.substrates.kubernetes.operator.loaded import LoadedJobs
from kubemill.substrates.kubernetes.operator.memory import JobMemory
from kubemill.substrates.kubernetes.operator.metrics import Metrics
from kubemill.substrates.kubernetes.operator.referred import Referrers, resolved
from kubemill.substrates.kubernetes.operator.remote import RemoteRuns
from kubemill.substrates.kubernetes.operator.settings import JobResource
from kubemill.substrates.kubernetes.operator.waves import (
    child_ref,
    created_child,
    creation_wave,
    object_resource,
    replica_ref,
)
from kubemill.substrates.kubernetes.operator.writes import (
    EventPoster,
    RetryLater,
    coalesce_events,
    merge_patch,
    pair_events,
)
from kubemill.substrates.kubernetes.progress import ProgressSidecar
from kubemill.substrates.kubernetes.render import reconcile_options
from kubemill.substrates.kubernetes.restarts import (
    RESTARTS_ANNOTATION,
    counts_read_back,
    keeps_counts_in_status,
    replace_counts,
    restart_counts,
    stored_counts,
    without_counts,
)

logger = logging.getLogger("kubemill.operator")

EXPECTATION_TIMEOUT = 30.0
"""Seconds to wait for the caches to show the operator's own creates and deletes."""
STATUS_WRITE_ATTEMPTS = 3
"""Tries of a status patch within one pass: a restart is counted in the very pass that
deletes the pod, so losing that status write would lose the count."""


def _now() -> datetime:
    # Whole seconds, as Kubernetes times: no status re-write for a sub-second difference.
    return datetime.now(tz=UTC).replace(microsecond=0)


class Reconciler:
    """Reconciles jobs by key; one instance serves every job of the operator."""

    def __init__(
        self,
        *,
        api: KubeApi,
        caches: Caches,
        resources: Mapping[tuple[str, str], JobResource],
        post_event: EventPoster,
        metrics: Metrics,
        gang_scheduler: str | None,
        clock: Callable[[], datetime] = _now,
        progress: ProgressSidecar | None = None,
    ) -> None:
        self._api = api
        self._caches = caches
        self._resources = resources
        self._post_event = post_event
        self._metrics = metrics
        self._gang = GangScheduler.named(gang_scheduler) if gang_scheduler else None
        # The same plan and options as `kubemill render`, so it shows what is sent here.
        self._options = reconcile_options(self._gang)
        self._clock = clock
        self._memory: dict[JobKey, JobMemory] = {}
        self._loaded = LoadedJobs()
        self._referrers = Referrers(caches, resources)
        self._progress = progress  # job pods' progress sidecar
        # A remote run's bearer token is that of the Secret the operator made for it.
        self._remote = RemoteRuns(post_event, read_secret=self._read_secret)

    async def _read_secret(self, namespace: str, name: str) -> dict[str, Any]:
        """The Secret ``name`` the operator made for a job (a user's Secret of that name,
        without kubemill's job label, is not it): listed by its name, with the list the
        operator holds for its cache (it holds no get of Secrets; its cache keeps no
        Secret's data)."""
        ref = ObjectRef("v1", "secrets", namespace, "")
        found = await self._api.list(
            ref, label_selector=LABEL_JOB_NAME, field_selector=f"metadata.name={name}"
        )
        if not found:
            raise LookupError(f"secrets {namespace}/{name} not found")
        return found[0]

    def knows(self, key: JobKey) -> bool:
        """Whether the job ``key`` is in the cache."""
        return self._caches.job(key) is not None

    def reload(self, plurals: set[str]) -> list[JobKey]:
        """The cached jobs of ``plurals``, loaded and planned afresh at their next pass."""
        return self._loaded.forget_all([k for k in self._caches.jobs if k[1] in plurals])

    def referrers(self, kind: str, key: JobKey) -> list[JobKey]:
        """The cached jobs that name the job ``key`` of ``kind`` (:class:`.referred.Referrers`)."""
        return self._referrers.of(kind, key)

    def forget(self, key: JobKey) -> None:
        """The job is gone: drop what was remembered of it."""
        self._memory.pop(key, None)
        self._loaded.forget(key)
        self._remote.forget(key)

    async def reconcile(self, key: JobKey) -> float | None:
        """One pass over the job ``key``; returns seconds until it must be looked at again.

        Raises :class:`RetryLater` when writes failed.
        """
        group, plural, namespace, name = key
        resource = self._resources[group, plural]
        raw = self._caches.job(key)
        if raw is None:
            self.forget(key)
            return None
        memory = self._memory.setdefault(key, JobMemory())
        rv = str(raw.get("metadata", {}).get("resourceVersion", ""))
        if memory.written is not None and rv in memory.stale_rvs:
            raw = memory.written  # the cache has not seen our last status write yet
        else:
            memory.written, memory.stale_rvs = None, frozenset()
        if raw.get("metadata", {}).get("deletionTimestamp"):
            return None  # being deleted: the garbage collector removes the children
        if memory.deleted_uid is not None and memory.deleted_uid == raw.get("metadata", {}).get(
            "uid"
        ):
            return None  # deleted by us; the watch has not caught up yet

        # Cheap check first: while our own writes are not in the caches, there is nothing to
        # judge (each child's watch event wakes the job again).
        child_key = (namespace, name)
        pods: list[PodSnapshot] = self._caches.children("pods", child_key)
        services: list[ChildSnapshot] = self._caches.children("services", child_key)
        groups: list[ChildSnapshot] = self._caches.children("pod_groups", child_key)
        owned = self._caches.owned(child_key)
        controllers: list[ControllerSnapshot] = self._caches.children("controllers", child_key)
        pending = memory.pending(
            pods=pods, services=services, groups=groups, owned=owned, controllers=controllers
        )
        if pending is not None:
            return pending

        started = time.monotonic()
        stored = raw
        raw = counts_read_back(raw, resource.group, memory.unwritten_counts)
        # (``stored`` may be our last status write's answer: its version, not the cache's.)
        version = str(stored.get("metadata", {}).get("resourceVersion", ""))
        loaded = self._load_and_plan(key, raw, version if raw is stored else None, memory)
        if loaded is None:
            return None
        job, plan = loaded

        lifecycle = lifecycle_for(job.KIND)
        if lifecycle.pods_by_label:
            observed = observe_service(job, plan, pods=pods, services=services, children=owned)
        else:
            observed = observe(
                job,
                plan,
                pods=pods,
                services=services,
                pod_group=next(iter(groups), None),
                deleting={n: uid for (k, n), (uid, _) in memory.deleting.items() if k == "pod"},
                children=owned,
            )
        refused = tuple(Refusal(k, n, m) for (k, n), m in sorted(memory.refused.items()))
        observed = replace(
            observed,
            refused=refused,
            progress=self._caches.progress_of(key),
            controllers=observed_controllers(job, controllers),
        )
        observed = await self._remote.observe(key, plan, pods, observed)  # Plan.remote's answer
        result = reconcile(
            job, plan, observed, self._clock(), options=self._options, lifecycle=lifecycle
        )
        result = await self._remote.submit(key, stored, result)  # SubmitRemote, done here
        try:
            await self._apply(stored, job, plan, resource, result, memory)
        except UnsupportedPlanError as exc:
            self._report_invalid(raw, memory, str(exc))
            return None
        self._metrics.reconcile_seconds.labels(kind=resource.kind).observe(
            time.monotonic() - started
        )
        if logger.isEnabledFor(logging.DEBUG):  # no count made for a line not written
            actions = sum(not isinstance(a, RecordEvent) for a in result.actions)
            line = "reconciled %s/%s at resourceVersion %s: %d actions"
            logger.debug(line, namespace, name, rv, actions)
        return self._remote.requeue(key, result)  # the core's, sooner while a run is followed

    # -- reading -------------------------------------------------------------------------------

    def _load_and_plan(
        self, key: JobKey, raw: Mapping[str, Any], rv: str | None, memory: JobMemory
    ) -> tuple[Job, Plan] | None:
        """The job and its plan, or None (reported) when either is invalid. ``rv``: the
        resourceVersion ``raw`` is exactly the stored object of (None when counts were read
        back into it): the same version as the last pass reuses that pass's job and plan;
        the jobs it names are resolved from the caches anew (:mod:`.referred`)."""
        loaded = self._loaded.load(
            key, raw, rv, lambda job: resolved(job, self._caches, self._resources)
        )
        if isinstance(loaded, str):
            self._report_invalid(raw, memory, loaded)
            return None
        memory.invalid_rv = None
        return loaded

    def _report_invalid(self, raw: Mapping[str, Any], memory: JobMemory, problem: str) -> None:
        rv = str(raw.get("metadata", {}).get("resourceVersion", ""))
        if memory.invalid_rv == rv:
            return
        memory.invalid_rv = rv
        meta = raw.get("metadata", {})
        logger.warning("%s/%s is not valid: %s", meta.get("namespace"), meta.get("name"), problem)
        self._post_event(
            raw, "Warning", "InvalidSpec", f"kubemill cannot run this job: {problem}"[:1000]
        )

    # -- writing -------------------------------------------------------------------------------

    async def _apply(
        self,
        raw: Mapping[str, Any],
        job: Job,
        plan: Plan,
        resource: JobResource,
        result: ReconcileResult,
        memory: JobMemory,
    ) -> None:
        owner = Owner.of(job, api_version=resource.api_version)
        judges_refusals = lifecycle_for(job.KIND).judges_refusals
        steps, status_events = pair_events(result.actions)
        key = (job.namespace, job.name)
        # (kind, name) -> uid of every child in the cache: deletes carry it as a precondition
        # and remember it until the cache no longer shows that child.
        owned = self._caches.owned(key)
        uids = (
            {("pod", p.name): p.uid for p in self._caches.children("pods", key)}
            | {("service", s.name): s.uid for s in self._caches.children("services", key)}
            | {("podgroup", g.name): g.uid for g in self._caches.children("pod_groups", key)}
            | {(kind, c.name): c.uid for kind, cs in owned.items() for c in cs}
            | {("controller", c.name): c.uid for c in self._caches.children("controllers", key)}
        )
        versions: dict[tuple[str, str], str] = {
            (kind, c.name): c.resource_version for kind, cs in owned.items() for c in cs
        }

        failures: list[ApiError] = []
        done: list[RecordEvent] = []

        async def run(action: Action, events: list[RecordEvent]) -> None:
            created = created_child(action)
            if created is not None:
                memory.refused.pop(created, None)  # asked for again: a new attempt
            try:
                await self._execute(
                    action, job, plan, resource, owner, uids, memory, versions=versions
                )
            except ApiError as exc:
                self._count_error(exc)
                outcome = classify(exc)
                if created is not None and outcome is Outcome.BLOCKED and judges_refusals:
                    # A refused submission is the core's to judge (SUBMISSION_FAILED and
                    # its retries), not a write to retry: report it, write the status.
                    memory.refused[created] = exc.message or f"{exc.status} {exc.reason}"
                    logger.info("%s/%s: %s", job.namespace, job.name, exc)
                    return
                if outcome is not Outcome.ALREADY_DONE:
                    failures.append(exc)
                    return
            done.extend(events)

        # Each wave at once, in order (see creation_wave); deleting the job itself comes
        # last, after its final status.
        last = [s for s in steps if isinstance(s[0], DeleteJob)]
        waves: dict[int, list[tuple[Action, list[RecordEvent]]]] = {}
        for step in steps:
            if not isinstance(step[0], DeleteJob):
                waves.setdefault(creation_wave(step[0]), []).append(step)
        try:
            for wave in sorted(waves):
                if failures:
                    break
                await asyncio.gather(*(run(action, events) for action, events in waves[wave]))
            if failures:
                raise RetryLater(
                    failures, blocked=any(classify(e) is Outcome.BLOCKED for e in failures)
                )
            await self._write_status(raw, job, resource, result.status, memory)
            done.extend(status_events)
            for action, events in last:
                await run(action, events)
            if failures:
                raise RetryLater(failures, blocked=False)
        finally:
            for type_, reason, message in coalesce_events(done):
                self._post_event(raw, type_, reason, message)

    async def _execute(
        self,
        action: Action,
        job: Job,
        plan: Plan,
        resource: JobResource,
        owner: Owner,
        uids: Mapping[tuple[str, str], str],
        memory: JobMemory,
        *,
        versions: Mapping[tuple[str, str], str],
    ) -> None:
        namespace = job.namespace
        deadline = time.monotonic() + EXPECTATION_TIMEOUT
        if isinstance(action, CreatePod | CreateService | CreatePodGroup):
            body = build_for_action(
                job, plan, action, gang=self._gang, owner=owner, progress=self._progress
            )
            assert body is not None
            if isinstance(action, CreatePod):  # its pod, or its Job (a child controller)
                ref, expected, _ = replica_ref(plan, namespace, action.name)
            elif isinstance(action, CreateService):
                ref = ObjectRef("v1", "services", namespace, action.name)
                expected = ("service", action.name)
            else:
                assert self._gang is not None, "the core asks for a PodGroup only with a gang"
                ref = ObjectRef(self._gang.api_version, self._gang.plural, namespace, action.name)
                expected = ("podgroup", action.name)
            await self._create(ref, body, memory, expected, deadline)
        elif isinstance(action, DeletePod):
            ref, expected, propagation = replica_ref(plan, namespace, action.name)
            await self._delete_child(ref, expected, uids, memory, deadline, propagation)
        elif isinstance(action, DeleteService):
            ref = ObjectRef("v1", "services", namespace, action.name)
            await self._delete_child(ref, ("service", action.name), uids, memory, deadline)
        elif isinstance(action, DeletePodGroup):
            assert self._gang is not None
            ref = ObjectRef(self._gang.api_version, self._gang.plural, namespace, action.name)
            await self._delete_child(ref, ("podgroup", action.name), uids, memory, deadline)
        elif isinstance(action, WriteFiles):
            kind: ChildKind = "Secret" if action.secret else "ConfigMap"
            ref = child_ref(kind, namespace, action.name)
            body = build_for_action(job, plan, action, gang=self._gang, owner=owner)
            assert body is not None
            if not action.update:
                await self._create(ref, body, memory, (kind, action.name), deadline)
            else:
                # Rewritten whole, at the version the pass read: a change meanwhile is a 409
                # and a later pass decides again.
                version = versions.get((kind, action.name))
                if version:
                    body = {**body, "metadata": {**body["metadata"], "resourceVersion": version}}
                memory.updating[(kind, action.name)] = (action.digest, deadline)
                try:
                    await self._api.replace(ref, body)
                except ApiError:
                    memory.updating.pop((kind, action.name), None)
                    raise
        elif isinstance(action, CreateChild):
            body = build_for_action(job, plan, action, gang=self._gang, owner=owner)
            assert body is not None
            ref = child_ref(action.kind, namespace, action.name)
            await self._create(ref, body, memory, (action.kind, action.name), deadline)
        elif isinstance(action, CreateObject):
            body = build_for_action(job, plan, action, gang=self._gang, owner=owner)
            assert body is not None
            api_version, plural = object_resource(body)
            ref = ObjectRef(api_version, plural, namespace, action.name)
            # Services are cached as "service" children, the rest under their kind.
            key = (
                ("service", action.name) if action.kind == "Service" else (action.kind, action.name)
            )
            await self._create(ref, body, memory, key, deadline)
        elif isinstance(action, UpdateObject):
            # Rewritten whole at the version the pass read, as delivered files are.
            body = build_for_action(job, plan, action, gang=self._gang, owner=owner)
            assert body is not None
            api_version, plural = object_resource(body)
            ref = ObjectRef(api_version, plural, namespace, action.name)
            version = versions.get((action.kind, action.name))
            if version:
                body = {**body, "metadata": {**body["metadata"], "resourceVersion": version}}
            memory.updating[(action.kind, action.name)] = (action.digest, deadline)
            try:
                await self._api.replace(ref, body)
            except ApiError:
                memory.updating.pop((action.kind, action.name), None)
                raise
        elif isinstance(action, DeleteChild):
            ref = child_ref(action.kind, namespace, action.name)
            await self._delete_child(ref, (action.kind, action.name), uids, memory, deadline)
        elif isinstance(action, DeleteJob):
            ref = ObjectRef(resource.api_version, resource.plural, namespace, job.name)
            await self._api.delete(ref, uid=owner.uid, propagation="Background")
            memory.deleted_uid = owner.uid
        else:  # pragma: no cover - RecordEvent never reaches here (paired with its action)
            raise TypeError(f"unknown action {action!r}")

    async def _delete_child(
        self,
        ref: ObjectRef,
        child: tuple[str, str],
        uids: Mapping[tuple[str, str], str],
        memory: JobMemory,
        deadline: float,
        propagation: str = "",
    ) -> None:
        """Delete a child and expect the cache to drop it (no pass judges it meanwhile)."""
        uid = uids.get(child, "")
        memory.deleting[child] = (uid, deadline)
        try:
            await self._api.delete(ref, uid=uid, propagation=propagation or None)
        except ApiError:
            memory.deleting.pop(child, None)
            raise

    async def _create(
        self,
        ref: ObjectRef,
        body: Mapping[str, Any],
        memory: JobMemory,
        child: tuple[str, str],
        deadline: float,
    ) -> None:
        memory.creating[child] = deadline
        try:
            await self._api.create(ref, body, answer=False)  # the cache learns it by its watch
        except ApiError as exc:
            if classify(exc) is not Outcome.ALREADY_DONE:
                memory.creating.pop(child, None)
            raise

    async def _write_status(
        self,
        raw: Mapping[str, Any],
        job: Job,
        resource: JobResource,
        status: JobStatus,
        memory: JobMemory,
    ) -> None:
        """Write the new status at the resourceVersion the pass read.

        A ``409 Conflict`` means the job changed since: the decision may be stale, so the
        pass ends (:class:`RetryLater`) and the job is reconciled again with fresh data; the
        restart counts the write carried are remembered until a later write records them.
        For a job whose CRD cannot hold restart counts the counts go to
        :data:`RESTARTS_ANNOTATION` first.
        """
        before = job.status.to_wire()
        after = status.to_wire()
        # The job was judged with counts the server may not have (a failed write's): diff
        # against the counts it does have, so that this write records them.
        on_server = stored_counts(raw, resource.group)
        if keeps_counts_in_status(resource.group):
            before = replace_counts(before, on_server)
        patch = merge_patch(before, after)
        counts = restart_counts(after)
        annotate = False
        if not keeps_counts_in_status(resource.group):
            patch = without_counts(patch)  # the server would prune them
            annotate = counts != on_server
        if not patch and not annotate:
            memory.unwritten_counts = None
            return
        ref = ObjectRef(resource.api_version, resource.plural, job.namespace, job.name)
        read_rv = str(raw.get("metadata", {}).get("resourceVersion", "")) or None
        versions = {read_rv} if read_rv else set()
        rv = read_rv
        written: dict[str, Any] | None = None
        try:
            if annotate:
                text = json.dumps(counts, sort_keys=True, separators=(",", ":"))
                written = await self._retrying(
                    lambda: self._api.patch_annotations(
                        ref, {RESTARTS_ANNOTATION: text}, resource_version=rv
                    )
                )
                rv = str(written.get("metadata", {}).get("resourceVersion", "")) or None
                if rv:
                    versions.add(rv)
            if patch:
                written = await self._retrying(
                    lambda: self._api.patch_status(ref, patch, resource_version=rv)
                )
        except ApiError as exc:
            memory.unwritten_counts = counts
            if exc.status == 409:
                logger.info(
                    "%s/%s changed since resourceVersion %s: judging it again",
                    job.namespace,
                    job.name,
                    read_rv,
                )
            raise RetryLater([exc], blocked=classify(exc) is Outcome.BLOCKED) from None
        memory.unwritten_counts = None
        memory.stale_rvs = frozenset(versions)
        memory.written = cached_job(written) if written is not None else None
        if written is not None and read_rv and not annotate:  # the status alone: .loaded
            made = str(written.get("metadata", {}).get("resourceVersion", ""))
            key = (resource.group, resource.plural, job.namespace, job.name)
            self._loaded.status_written(key, read_rv, made)
        self._metrics.count_transitions(resource.kind, job.status, status)

    async def _retrying(self, call: Callable[[], Any]) -> dict[str, Any]:
        """``call`` with up to :data:`STATUS_WRITE_ATTEMPTS` tries on transient errors (a
        conflict is not one: the same request would conflict again)."""
        for attempt in range(STATUS_WRITE_ATTEMPTS):
            try:
                result: dict[str, Any] = await call()
                return result
            except ApiError as exc:
                self._count_error(exc)
                last_try = attempt == STATUS_WRITE_ATTEMPTS - 1
                if classify(exc) is not Outcome.RETRY or exc.status == 409 or last_try:
                    raise
                await asyncio.sleep(0.2 * (attempt + 1))
        raise AssertionError("unreachable")  # pragma: no cover

    def _count_error(self, error: ApiError) -> None:
        self._metrics.api_errors.labels(
            verb=error.verb, resource=error.ref.plural, code=str(error.status)
        ).inc()
