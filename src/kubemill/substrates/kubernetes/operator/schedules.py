"""One pass of any controller kind (a Spark schedule, a plugin's): caches -> its
rules' ``decide`` (:class:`kubemill.core.ControllerRules`) -> API writes.

A controller runs no pods: it creates and deletes jobs of another kind (its *runs*), which
the operator then reconciles as any job. The pass reads the controller's object from the
jobs cache and its runs from the ``kubemill_runs`` index (jobs carrying the rules'
``run_label`` with its name, kept only if its uid controls them), asks the registry's rules
(with a :class:`~kubemill.core.ControllerContext`: the time-zone database is files, which
the core cannot read), and carries the actions out: runs are created in the controller's
own API group, owned by it, and deleted with the uid they were judged by as a precondition;
the status is written through the status subresource at the resourceVersion the pass read,
as a merge patch of what changed. The result's ``wake_at`` wakes the controller when its
next pass is due; every change of one of its runs wakes it too (the runtime enqueues a
job's controlling owner).

Runs are named by the rules deterministically (a schedule's after the time it was due), so
a pass repeated after a lost status write asks for the same run again and its create is
answered ``AlreadyExists``: no run starts twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Any

from kubemill.api import JobStatus
from kubemill.core import (
    ControllerAction,
    ControllerContext,
    ControllerResult,
    CreateRun,
    DeleteRun,
    ObservedRun,
    RecordEvent,
)
from kubemill.kinds import Controller, controllers, load_document, status_type
from kubemill.substrates.kubernetes.observe import controller_uid
from kubemill.substrates.kubernetes.operator.caches import JobKey
from kubemill.substrates.kubernetes.operator.kubeapi import (
    ApiError,
    KubeApi,
    ObjectRef,
    Outcome,
    classify,
)
from kubemill.substrates.kubernetes.operator.metrics import Metrics
from kubemill.substrates.kubernetes.operator.settings import JobResource
from kubemill.substrates.kubernetes.operator.writes import (
    EventPoster,
    RetryLater,
    coalesce_events,
    merge_patch,
)
from kubemill.substrates.kubernetes.zones import resolve_zone

logger = logging.getLogger("kubemill.operator")

RunKey = tuple[str, str, str]
"""(group, namespace, controller name): how the runs index is keyed."""
WAKE_MARGIN = 0.005
"""Seconds past a run's due time to wake at, so the pass sees it due."""


def run_labels(kind: str) -> tuple[str, ...]:
    """The labels that name the controller of a run of ``kind`` (one per controller kind
    that creates such runs: a Spark application's is upstream's ``scheduled-app-name``)."""
    return tuple(dict.fromkeys(c.rules.run_label for c in controllers() if c.controls == kind))


def run_key(body: Mapping[str, Any], group: str, labels: Iterable[str]) -> RunKey | None:
    """The runs-index key of a job object: its controller, if it is a run of one."""
    meta = body.get("metadata") or {}
    found = meta.get("labels") or {}
    for label in labels:
        name = found.get(label)
        if name:
            return (group, meta.get("namespace", ""), name)
    return None


def _now() -> datetime:
    return datetime.now(tz=UTC)


@dataclass
class _Memory:
    """What the loop remembers of one controller object between passes (from the cluster)."""

    stale_rv: str | None = None
    """The resourceVersion our last status write replaced: the cache still showing it has
    not seen that write yet."""
    written: dict[str, Any] | None = None
    """The object as our last status patch returned it."""


class ControllerLoop:
    """Reconciles the registered controllers' objects (Spark schedules, a
    plugin's controllers) by key, each by its registry entry's rules."""

    def __init__(
        self,
        *,
        api: KubeApi,
        jobs: Mapping[JobKey, Iterable[Mapping[str, Any]]],
        runs: Mapping[RunKey, Iterable[Mapping[str, Any]]],
        resources: Mapping[tuple[str, str], JobResource],
        post_event: EventPoster,
        metrics: Metrics,
        clock: Callable[[], datetime] = _now,
        zone_of: Callable[[str | None], tzinfo | str] = resolve_zone,
    ) -> None:
        self._api = api
        self._jobs = jobs
        self._runs = runs
        self._resources = resources
        self._post_event = post_event
        self._metrics = metrics
        self._clock = clock
        self._zone_of = zone_of
        by_kind = {c.kind: c for c in controllers()}
        self._controllers: dict[tuple[str, str], tuple[Controller, JobResource]] = {}
        for (group, plural), resource in resources.items():
            controller = by_kind.get(resource.kind)
            if controller is None:
                continue
            made = next(
                (
                    r
                    for r in resources.values()
                    if (r.group, r.kind) == (group, controller.controls)
                ),
                None,
            )
            if made is not None:
                self._controllers[group, plural] = (controller, made)
        self._memory: dict[JobKey, _Memory] = {}

    def handles(self, key: JobKey) -> bool:
        """Whether ``key`` is a controller's object (reconciled here, not as a job)."""
        return (key[0], key[1]) in self._controllers

    def forget(self, key: JobKey) -> None:
        self._memory.pop(key, None)

    def _cached(self, key: JobKey) -> Mapping[str, Any] | None:
        if key not in self._jobs:
            return None
        return next(iter(self._jobs[key]), None)

    async def reconcile(self, key: JobKey) -> float | None:
        """One pass over the controller object ``key``; seconds until its next pass is due
        (None: nothing to wait for). Raises :class:`RetryLater` when writes failed."""
        group, plural, namespace, name = key
        controller, run_resource = self._controllers[group, plural]
        resource = self._resources[group, plural]
        raw = self._cached(key)
        if raw is None:
            self.forget(key)
            return None
        memory = self._memory.setdefault(key, _Memory())
        rv = str((raw.get("metadata") or {}).get("resourceVersion", ""))
        if memory.written is not None and rv == memory.stale_rv:
            raw = memory.written  # the cache has not seen our last status write yet
        else:
            memory.written, memory.stale_rv = None, None
        meta = raw.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            return None  # its runs go with it (the garbage collector)
        started = time.monotonic()
        now = self._clock()
        result = self._decide(raw, group, controller, run_resource.kind, now)
        await self._apply(raw, resource, run_resource, result)
        self._metrics.reconcile_seconds.labels(kind=controller.kind).observe(
            time.monotonic() - started
        )
        runs = sum(isinstance(a, CreateRun | DeleteRun) for a in result.actions)
        logger.debug(
            "reconciled %s/%s at resourceVersion %s: %d actions", namespace, name, rv, runs
        )
        if result.wake_at is None:
            return None
        # Whole seconds decide (as the status records them); the wake-up is exact.
        return max((result.wake_at - self._clock()).total_seconds(), 0.0) + WAKE_MARGIN

    # -- deciding ------------------------------------------------------------------------------

    def _decide(
        self,
        raw: Mapping[str, Any],
        group: str,
        controller: Controller,
        runs_of: str,
        now: datetime,
    ) -> ControllerResult[JobStatus]:
        decided_at = now.replace(microsecond=0)
        job, errors = load_document(raw)
        if job is None or controller.kind != job.KIND:
            problems = "; ".join(str(e) for e in errors) or "it does not load"
            return controller.rules.refuse(raw.get("status") or {}, problems)
        runs = self._observed_runs(raw, group, runs_of)
        context = ControllerContext(zone_of=self._zone_of)
        return controller.rules.decide(job, runs, now=decided_at, context=context)

    def _observed_runs(self, raw: Mapping[str, Any], group: str, kind: str) -> list[ObservedRun]:
        meta = raw.get("metadata") or {}
        key = (group, meta.get("namespace", ""), meta.get("name", ""))
        uid = meta.get("uid")
        bodies = list(self._runs[key]) if key in self._runs else []
        observed = []
        model = status_type(kind)
        for body in bodies:
            run_meta = body.get("metadata") or {}
            if not uid or controller_uid(run_meta) != uid:
                continue  # a namesake's, or a run of an earlier controller of this name
            try:
                status = model.model_validate(body.get("status") or {})
            except ValueError:
                status = model()
            observed.append(
                ObservedRun(
                    name=run_meta.get("name", ""),
                    uid=run_meta.get("uid", ""),
                    status=status,
                    created=_parse_time(run_meta.get("creationTimestamp")),
                    deleting=bool(run_meta.get("deletionTimestamp")),
                )
            )
        return observed

    # -- writing -------------------------------------------------------------------------------

    async def _apply(
        self,
        raw: Mapping[str, Any],
        resource: JobResource,
        run_resource: JobResource,
        result: ControllerResult[JobStatus],
    ) -> None:
        meta = raw.get("metadata") or {}
        namespace = meta.get("namespace", "")
        steps, status_events = _paired(result.actions)
        done: list[RecordEvent] = []
        failures: list[ApiError] = []
        try:
            # In the core's order: a replaced run is deleted before its successor starts.
            for action, events in steps:
                try:
                    await self._execute(action, namespace, resource, run_resource)
                except ApiError as exc:
                    self._count_error(exc)
                    if classify(exc) is not Outcome.ALREADY_DONE:
                        failures.append(exc)
                        continue
                done.extend(events)
            if failures:
                raise RetryLater(
                    failures, blocked=any(classify(e) is Outcome.BLOCKED for e in failures)
                )
            await self._write_status(raw, resource, result.status)
            done.extend(status_events)
        finally:
            for type_, reason, message in coalesce_events(done):
                self._post_event(raw, type_, reason, message)

    async def _execute(
        self,
        action: CreateRun | DeleteRun,
        namespace: str,
        resource: JobResource,
        run_resource: JobResource,
    ) -> None:
        if isinstance(action, CreateRun):
            body = run_body(action, resource, run_resource)
            ref = ObjectRef(run_resource.api_version, run_resource.plural, namespace, action.name)
            await self._api.create(ref, body)
        elif isinstance(action, DeleteRun):
            ref = ObjectRef(run_resource.api_version, run_resource.plural, namespace, action.name)
            await self._api.delete(ref, uid=action.uid or None, propagation="Background")
        else:  # pragma: no cover - events are paired with their actions
            raise TypeError(f"unknown action {action!r}")

    async def _write_status(
        self, raw: Mapping[str, Any], resource: JobResource, status: JobStatus
    ) -> None:
        before = raw.get("status") or {}
        patch = merge_patch(before, status.to_wire())
        if not patch:
            return
        meta = raw.get("metadata") or {}
        key = (resource.group, resource.plural, meta.get("namespace", ""), meta.get("name", ""))
        ref = ObjectRef(resource.api_version, resource.plural, key[2], key[3])
        rv = str(meta.get("resourceVersion", "")) or None
        try:
            written = await self._api.patch_status(ref, patch, resource_version=rv)
        except ApiError as exc:
            self._count_error(exc)
            raise RetryLater([exc], blocked=classify(exc) is Outcome.BLOCKED) from None
        memory = self._memory.setdefault(key, _Memory())
        memory.stale_rv, memory.written = rv, written

    def _count_error(self, error: ApiError) -> None:
        self._metrics.api_errors.labels(
            verb=error.verb, resource=error.ref.plural, code=str(error.status)
        ).inc()


def run_body(action: CreateRun, resource: JobResource, run_resource: JobResource) -> dict[str, Any]:
    """The run as created: the rules' job, in the group of its controller (the object its
    owner reference must name), without a status."""
    body = action.run.to_wire()
    body.pop("status", None)
    body["apiVersion"] = run_resource.api_version
    body["kind"] = run_resource.kind
    for ref in body.get("metadata", {}).get("ownerReferences") or ():
        if ref.get("kind") == resource.kind:
            ref["apiVersion"] = resource.api_version
    return body


def _paired(
    actions: Iterable[ControllerAction],
) -> tuple[list[tuple[CreateRun | DeleteRun, list[RecordEvent]]], list[RecordEvent]]:
    """(action, its events) steps and the status's own events (as the job reconciler pairs
    them: an action's event is posted once the action succeeded)."""
    steps: list[tuple[CreateRun | DeleteRun, list[RecordEvent]]] = []
    status_events: list[RecordEvent] = []
    for action in actions:
        if not isinstance(action, RecordEvent):
            steps.append((action, []))
        elif steps and not steps[-1][1]:
            steps[-1][1].append(action)
        else:
            status_events.append(action)
    return steps, status_events


def _parse_time(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


__all__ = [
    "ControllerLoop",
    "RunKey",
    "run_body",
    "run_key",
    "run_labels",
]
