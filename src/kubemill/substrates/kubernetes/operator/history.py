"""The operator's history of deleted jobs: a record per job that went, the oldest pruned.

What a record holds and how it is stored is :mod:`kubemill.substrates.kubernetes.history`
(one ConfigMap per deleted job in the operator's own namespace). This module decides when
to write one, from what the operator already has, with no read of its own:

- the Events it posts on a job are noted as it posts them (:meth:`HistoryKeeper.posted`), the
  last :data:`EVENTS_PER_JOB` per job: the operator may only create Events, never list them,
  and kubelet's Events about pods are not the job's;
- its replicas (phase, exit code, restarts, times, reason) are taken from the pod cache when
  the job is first seen finished or being deleted (:meth:`HistoryKeeper.seen`): after that a
  cleanPodPolicy or the garbage collector removes the pods, and a deletion's pod events may
  reach the cache before the job's own;
- the job itself, spec and final status, is the last body the watch delivers with its
  DELETED event (:meth:`HistoryKeeper.deleted`).

No finalizer: one would cost a write on every job, and while no operator runs (uninstalled,
or every replica down) it would leave every deleted job stuck Terminating. The price is that
a job deleted while no replica leads leaves no record; the history is the operator's account
of what it saw, not an audit log (the API server's audit log is that).

Only the leading replica records (a record's name is the job's uid, so a write by two is
refused as a conflict, never doubled). Writes and pruning run on a task of their own, off
the watch handlers: a slow or refusing API server delays records, never reconciles. The
existing records are listed once at start (retried until it succeeds), so the count to keep
holds across restarts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from kubemill.kinds import controllers
from kubemill.substrates.base import ReplicaView
from kubemill.substrates.kubernetes.client.kinds import load_job
from kubemill.substrates.kubernetes.client.views import ControlledRun, controlled_view, view_of
from kubemill.substrates.kubernetes.controlled import ControllerSnapshot, observed_controllers
from kubemill.substrates.kubernetes.history import (
    PostedEvent,
    build_record,
    deleted_at,
    history_selector,
)
from kubemill.substrates.kubernetes.observe import (
    PodSnapshot,
    main_container_name,
    observed_pod,
    why,
)
from kubemill.substrates.kubernetes.operator.kubeapi import ApiError, KubeApi, ObjectRef
from kubemill.substrates.kubernetes.render import plan_on_kubernetes

logger = logging.getLogger("kubemill.operator")

EVENTS_PER_JOB = 50
"""Events kept per live job for its record (the latest)."""
MAX_PENDING = 10_000
"""Records waiting to be written beyond this are dropped (and logged): a refusing API
server must not grow the operator without bound."""
RETRY_SECONDS = (0.5, 2.0, 5.0)


def _finished(body: Mapping[str, Any]) -> bool:
    conditions = (body.get("status") or {}).get("conditions") or ()
    return any(
        c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True" for c in conditions
    )


def replica_views(
    body: Mapping[str, Any],
    pods: Iterable[PodSnapshot],
    controller_jobs: Iterable[ControllerSnapshot] = (),
) -> tuple[ReplicaView, ...]:
    """The job's pods as the core sees them (as ``kubemill get`` shows them), by name, and
    its replicas run through a child controller as read from the Jobs among
    ``controller_jobs`` that it controls (by owner uid, as the operator counts them).

    None for a controller kind (its runs are jobs of their own) or a job this version cannot
    plan (its record still keeps spec and status)."""
    if body.get("kind") in {c.kind for c in controllers()}:
        return ()
    try:
        job = load_job(body)
        plan = plan_on_kubernetes(job)
    except Exception as exc:  # a record without replicas beats none
        logger.warning("history: no replicas for %s: %s", _name(body), exc)
        return ()
    # A replica run through a child controller is read from its Job, as `get` reads it.
    runs = {c.name: ControlledRun(c) for c in observed_controllers(job, controller_jobs)}
    views = []
    for pod in pods:
        _, message = why(pod, pod.container(main_container_name(job, plan, pod)))
        views.append(view_of(observed_pod(job, plan, pod), message=message))
    for replica in plan.replicas:
        run = runs.get(replica.controller.name) if replica.controller else None
        if run is not None:
            views.append(controlled_view(job, replica, run))
    return tuple(sorted(views, key=lambda v: v.name))


def _name(body: Mapping[str, Any]) -> str:
    meta = body.get("metadata") or {}
    return f"{body.get('kind')} {meta.get('namespace')}/{meta.get('name')}"


class HistoryKeeper:
    """Records deleted jobs in ``namespace``, keeping the ``keep`` most recent.

    ``pods`` is the operator's pod cache ((namespace, job name) -> snapshots); ``leading``
    says whether this replica acts.
    """

    def __init__(
        self,
        api: KubeApi,
        *,
        namespace: str,
        keep: int,
        pods: Mapping[tuple[str, str], Iterable[PodSnapshot]],
        leading: Callable[[], bool],
        controllers: Mapping[tuple[str, str], Iterable[ControllerSnapshot]] | None = None,
    ) -> None:
        self._api = api
        self.namespace = namespace
        self.keep = keep
        self._pods = pods
        self._controllers = controllers if controllers is not None else {}
        self._leading = leading
        self._events: dict[str, list[PostedEvent]] = {}
        self._replicas: dict[str, tuple[ReplicaView, ...]] = {}
        self._pending: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=MAX_PENDING)
        self._kept: list[tuple[str, str]] = []
        """(deleted at, ConfigMap name) of the records there are, oldest first."""
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._write_forever(), name="kubemill-history")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def flush(self, timeout: float) -> None:
        """Wait (at most ``timeout`` s) until the records queued are written."""
        try:
            await asyncio.wait_for(self._pending.join(), timeout)
        except TimeoutError:
            logger.warning("history: %d records not written at exit", self._pending.qsize())

    # -- what the operator tells it ----------------------------------------------------------

    def posted(self, job: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        """The operator posted an Event on ``job``."""
        uid = str((job.get("metadata") or {}).get("uid") or "")
        if uid:
            # A list, not a deque of that length: a deque's first block has room for 64
            # (~0.5 KiB a job), where a job has a few events.
            kept = self._events.setdefault(uid, [])
            kept.append(PostedEvent(datetime.now(UTC), type, reason, message))
            if len(kept) > EVENTS_PER_JOB:
                del kept[0]

    def seen(self, body: Mapping[str, Any]) -> None:
        """A job's watch event (not DELETED): take its replicas once it is finished or
        being deleted, while the pod cache still has them."""
        meta = body.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if not uid or uid in self._replicas:
            return
        if meta.get("deletionTimestamp") or _finished(body):
            taken = self._replicas_now(body)
            if taken:
                self._replicas[uid] = taken

    def deleted(self, body: Mapping[str, Any]) -> None:
        """The job is gone: queue its record (this replica leading), forget the rest."""
        uid = str((body.get("metadata") or {}).get("uid") or "")
        events = tuple(self._events.pop(uid, ()))
        replicas = self._replicas.pop(uid, ())
        if not uid or not self._leading():
            return
        # A job deleted while running has its pods in the cache now, if anywhere.
        replicas = self._replicas_now(body) or replicas
        record = build_record(
            body,
            namespace=self.namespace,
            replicas=replicas,
            events=events,
            deleted=datetime.now(UTC),
        )
        if record is None:
            logger.warning("history: %s is too large to record", _name(body))
            return
        try:
            self._pending.put_nowait(record)
        except asyncio.QueueFull:
            logger.warning("history: record of %s dropped (queue full)", _name(body))

    def _replicas_now(self, body: Mapping[str, Any]) -> tuple[ReplicaView, ...]:
        meta = body.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        uid = meta.get("uid")
        pods = [p for p in self._pods.get(key, ()) if p.owner_uid == uid]
        jobs = list(self._controllers.get(key, ()))  # replica_views keeps the job's own
        return replica_views(body, pods, jobs) if pods or jobs else ()

    # -- writing -----------------------------------------------------------------------------

    def _ref(self, name: str = "") -> ObjectRef:
        return ObjectRef("v1", "configmaps", self.namespace, name)

    async def _write_forever(self) -> None:
        allowed = await self._load_kept()
        while True:
            record = await self._pending.get()
            try:
                if allowed:
                    await self._write(record)
                await self._prune()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("history: record %s not written", record["metadata"]["name"])
            finally:
                self._pending.task_done()

    async def _load_kept(self) -> bool:
        """List the records there are (and prune them to the count); False if this
        operator may not (installed with ``--history 0``, or run by hand without the
        grant): it then records nothing, rather than retry forever."""
        delays = iter(RETRY_SECONDS)
        while True:
            try:
                found = await self._api.list(self._ref(), label_selector=history_selector())
                break
            except ApiError as exc:
                if exc.status in (401, 403):
                    logger.error(
                        "history: no records kept: listing configmaps in %s refused (%s); "
                        "`kubemill install --history N` grants it, --history 0 turns this off",
                        self.namespace,
                        exc,
                    )
                    return False
                delay = next(delays, RETRY_SECONDS[-1])
                logger.warning("history: records not listed (retrying in %.1fs): %s", delay, exc)
                await asyncio.sleep(delay)
        self._kept = sorted((deleted_at(c), str(c["metadata"]["name"])) for c in found)
        await self._prune()
        return True

    async def _write(self, record: dict[str, Any]) -> None:
        name = str(record["metadata"]["name"])
        for delay in (*RETRY_SECONDS, None):
            try:
                await self._api.create(self._ref(name), record)
                break
            except ApiError as exc:
                if exc.status == 409:  # recorded already (another replica, or a replay)
                    return
                if delay is None or exc.status in (400, 403, 404, 422):
                    logger.warning("history: record %s not written: %s", name, exc)
                    return
                await asyncio.sleep(delay)
        self._kept.append((deleted_at(record), name))
        self._kept.sort()

    async def _prune(self) -> None:
        while len(self._kept) > self.keep:
            _, name = self._kept[0]
            try:
                await self._api.delete(self._ref(name))
            except ApiError as exc:
                if exc.status != 404:
                    logger.warning("history: old record %s not deleted: %s", name, exc)
                    return
            self._kept.pop(0)
