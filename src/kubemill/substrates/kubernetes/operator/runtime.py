"""The operator's moving parts between kopf and the reconcile: queue, workers, leadership.

kopf owns the watches and the caches (indexes) and calls :meth:`Runtime.job_changed` /
:meth:`Runtime.child_changed` on every event (and :meth:`Runtime.known_object_changed` on
objects the jobs name, training runtimes); those only put the job's key on the
:class:`~.workqueue.WorkQueue` (and a job's controlling owner's, when that is a served kind:
a schedule hears of its runs). ``settings.workers`` tasks take keys off the
queue and run :meth:`Reconciler.reconcile` (or, for a controller kind,
:meth:`~.schedules.ControllerLoop.reconcile`), requeueing on ``requeue_after`` and
backing off on API errors.
Workers run only while this replica leads (always, without leader election).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from kubemill.api import ManifestError
from kubemill.core import ObservedProgress
from kubemill.engines.base import InstallExtra
from kubemill.frameworks import LABEL_JOB_NAME
from kubemill.progress import FORWARD_AUDIENCE
from kubemill.substrates.kubernetes.observe import controller_uid
from kubemill.substrates.kubernetes.operator.caches import Caches, JobKey
from kubemill.substrates.kubernetes.operator.events import EventPoster
from kubemill.substrates.kubernetes.operator.history import HistoryKeeper
from kubemill.substrates.kubernetes.operator.kubeapi import KubeApi, load_client_configuration
from kubemill.substrates.kubernetes.operator.leader import LeaderElector
from kubemill.substrates.kubernetes.operator.metrics import Metrics
from kubemill.substrates.kubernetes.operator.progress import ProgressEndpoint
from kubemill.substrates.kubernetes.operator.reconciler import Reconciler
from kubemill.substrates.kubernetes.operator.schedules import ControllerLoop, RunKey
from kubemill.substrates.kubernetes.operator.settings import JobResource, OperatorSettings
from kubemill.substrates.kubernetes.operator.workqueue import WorkQueue
from kubemill.substrates.kubernetes.operator.writes import RetryLater

logger = logging.getLogger("kubemill.operator")

_LABELLED_OWNERS = frozenset({("v1", "Pod"), ("apps/v1", "ReplicaSet")})
"""Controllers of pods that belong to a job without the job controlling them: a Spark
driver's executors, a service cluster's Deployments' pods. Such a pod names its job by label."""


class Runtime:
    """One operator process: created before kopf starts, started by kopf's startup hook."""

    def __init__(self, settings: OperatorSettings) -> None:
        self.settings = settings
        self.metrics = Metrics()
        self.resources: dict[tuple[str, str], JobResource] = {
            (r.group, r.plural): r for r in settings.job_resources()
        }
        self._by_kind: dict[tuple[str, str], JobResource] = {
            (r.api_version, r.kind): r for r in settings.job_resources()
        }
        self.queue: WorkQueue[JobKey] = WorkQueue(max_delay=settings.max_backoff_seconds)
        # Read when /metrics is scraped, not set at every key queued and taken (a lock each).
        self.metrics.queue_depth.set_function(lambda: len(self.queue))
        self.leading = False
        self.stop_flag: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._api: KubeApi | None = None
        self._elector: LeaderElector | None = None
        self._events: EventPoster | None = None
        self._history: HistoryKeeper | None = None
        self._reconciler: Reconciler | None = None
        self._controller_loop: ControllerLoop | None = None
        self._workers: list[asyncio.Task[None]] = []
        self.progress: dict[JobKey, dict[str, ObservedProgress]] = {}
        """Each replica's latest progress report by job (``Caches.progress``)."""
        self._progress_endpoint: ProgressEndpoint | None = None
        self._unchanged: set[str] = set()
        """Uids of children whose event left what the cache holds of them as it was
        (:meth:`unchanged_child`), until that event reaches :meth:`child_changed`."""

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(
        self, caches: Caches, runs: Mapping[RunKey, Iterable[Mapping[str, Any]]] | None = None
    ) -> None:
        """Connect, then reconcile (at once, or once this replica leads). ``runs``: the
        index of the jobs controller kinds created."""
        self._loop = asyncio.get_running_loop()
        configuration = load_client_configuration(context=self.settings.context)
        self._api = KubeApi(configuration, concurrency=self.settings.api_concurrency)
        self._events = EventPoster(self._api, instance=self.settings.identity)
        self._events.start()
        if self.settings.history:
            self._history = HistoryKeeper(
                self._api,
                namespace=self.settings.history_namespace,
                keep=self.settings.history,
                pods=caches.pods,
                leading=lambda: self.leading,
                controllers=caches.controllers,
            )
            self._history.start()
        self._reconciler = Reconciler(
            api=self._api,
            caches=caches,
            resources=self.resources,
            post_event=self._post_event,
            metrics=self.metrics,
            gang_scheduler=self.settings.gang_scheduler_name,
            progress=self.settings.progress_sidecar(),
        )
        self._controller_loop = ControllerLoop(
            api=self._api,
            jobs=caches.jobs,
            # An index is empty (falsy) at start: never swap it for a dict of our own.
            runs=runs if runs is not None else {},
            resources=self.resources,
            post_event=self._post_event,
            metrics=self.metrics,
        )
        if self.settings.metrics_port:
            self.metrics.serve(port=self.settings.metrics_port, address=self.settings.bind_address)
        if self.settings.progress_port:
            await self._serve_progress(caches, self.settings.progress_port)
        if self.settings.leader_election:
            self._elector = LeaderElector(
                self._api,
                name=self.settings.lease_name,
                namespace=self.settings.lease_namespace,
                identity=self.settings.identity,
                lease_duration=self.settings.lease_duration_seconds,
                on_started=self._lead,
                on_stopped=self._lost_lead,
            )
            self._elector.start()
        else:
            self._lead()

    async def stop(self) -> None:
        if self._elector is not None:
            await self._elector.stop()
        for task in self._workers:
            task.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._workers = []
        self.queue.close()
        if self._events is not None:
            await self._events.flush(timeout=5.0)
            await self._events.stop()
        if self._history is not None:
            await self._history.flush(timeout=5.0)
            await self._history.stop()
        if self._progress_endpoint is not None:
            await self._progress_endpoint.stop()
        if self._api is not None:
            self._api.close()

    async def _serve_progress(self, caches: Caches, port: int) -> None:
        """Take job pods' progress reports (:mod:`.progress`) on ``port``."""
        api = self._api
        assert api is not None

        async def review(token: str) -> dict[str, Any]:
            return await api.review_token(token, audience=FORWARD_AUDIENCE)

        self._progress_endpoint = ProgressEndpoint(
            review=review,
            caches=caches,
            resources=self._by_kind,
            reports=self.progress,
            leading=lambda: self.leading,
            wake=self._enqueue,
        )
        await self._progress_endpoint.start(address=self.settings.bind_address, port=port)

    def _post_event(self, job: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        """Post an Event on ``job``, noted for its history record."""
        assert self._events is not None
        self._events.post(job, type, reason, message)
        if self._history is not None:
            self._history.posted(job, type, reason, message)

    def _lead(self) -> None:
        self.leading = True
        self.metrics.leader.set(1)
        self._workers = [
            asyncio.create_task(self._work(), name=f"kubemill-reconcile-{i}")
            for i in range(self.settings.workers)
        ]

    def _lost_lead(self) -> None:
        # Another replica may act from now on: stop at once; the pod restarts as a follower.
        logger.error("lost the lease %s: stopping", self.settings.lease_name)
        self.leading = False
        self.metrics.leader.set(0)
        for task in self._workers:
            task.cancel()
        if self.stop_flag is not None:
            self.stop_flag.set()

    # -- events from kopf ----------------------------------------------------------------------

    def job_changed(self, resource: JobResource, event: Mapping[str, Any]) -> None:
        meta = (event.get("object") or {}).get("metadata") or {}
        key: JobKey = (
            resource.group,
            resource.plural,
            meta.get("namespace", ""),
            meta.get("name", ""),
        )
        self._enqueue_owner(meta)
        if self._reconciler is not None:
            # Jobs that name this one (runs on a cluster that exists) are planned again.
            for other in self._reconciler.referrers(resource.kind, key):
                self._enqueue(other)
        if self._history is not None:
            body = event.get("object") or {}
            if event.get("type") == "DELETED":
                self._history.deleted(body)
            else:
                self._history.seen(body)
        if event.get("type") == "DELETED":
            self.queue.discard(key)
            self.progress.pop(key, None)
            if self._reconciler is not None:
                self._reconciler.forget(key)
            if self._controller_loop is not None:
                self._controller_loop.forget(key)
            return
        self._enqueue(key)

    def _enqueue_owner(self, meta: Mapping[str, Any]) -> None:
        """A job changed: its controlling owner, if a served kind, hears of it (a
        schedule's runs wake it, their deletion too)."""
        for ref in meta.get("ownerReferences") or ():
            if not ref.get("controller"):
                continue
            owner = self._by_kind.get((ref.get("apiVersion", ""), ref.get("kind", "")))
            if owner is not None:
                namespace = meta.get("namespace", "")
                self._enqueue((owner.group, owner.plural, namespace, ref.get("name", "")))

    def unchanged_child(self, uid: str) -> None:
        """The child ``uid``'s event being indexed left its snapshot as the cache had it: it
        changed nothing a reconcile reads (a pod's PodScheduled condition, its managed
        fields), so :meth:`child_changed` wakes no pass for it (a pass would decide the
        same: the core's own timers requeue the job, never a child's event)."""
        self._unchanged.add(uid)

    def child_changed(self, body: Mapping[str, Any], *, deleted: bool = False) -> None:
        """A child changed (or was ``deleted``): reconcile the job that controls it, unless
        the event left its snapshot as the cache had it (see :meth:`unchanged_child`).

        A foreign pod (controlled by one of the job's pods, e.g. a Spark executor) and a
        service cluster's pod (controlled by its Deployment's ReplicaSet) name their job only
        by the ``kubemill.dev/job-name`` label: every served job of that name in the
        namespace is reconciled (the pass itself checks the pod's owner).
        """
        meta = body.get("metadata", {})
        uid = meta.get("uid")
        if uid in self._unchanged:
            self._unchanged.discard(uid)
            if not deleted:
                return
        if controller_uid(meta) is None:
            return
        namespace = meta.get("namespace", "")
        for ref in meta.get("ownerReferences") or ():
            if not ref.get("controller"):
                continue
            if (ref.get("apiVersion"), ref.get("kind")) in _LABELLED_OWNERS:
                job = (meta.get("labels") or {}).get(LABEL_JOB_NAME)
                if job and self._reconciler is not None:
                    for group, plural in self.resources:
                        key = (group, plural, namespace, job)
                        if self._reconciler.knows(key):
                            self._enqueue(key)
                continue
            resource = self._by_kind.get((ref.get("apiVersion", ""), ref.get("kind", "")))
            if resource is not None:
                self._enqueue((resource.group, resource.plural, namespace, ref.get("name", "")))

    def known_object(self, extra: InstallExtra, body: Mapping[str, Any]) -> bool:
        """Make one object the jobs of an engine name known (a training runtime as the
        cluster holds it); an invalid one is forgotten, with a warning. Whether it is known."""
        assert extra.known is not None and extra.forget is not None
        meta = body.get("metadata") or {}
        source = f"{body.get('kind')} {meta.get('namespace') or ''}/{meta.get('name')}"
        try:
            extra.known(body, source)
        except ManifestError as exc:
            logger.warning("%s is not valid, so not known: %s", source, exc)
            extra.forget(body)
            return False
        return True

    def known_object_changed(
        self, extra: InstallExtra, kind: str, event: Mapping[str, Any]
    ) -> None:
        """An object of ``extra``'s changed: known again (or forgotten once deleted), and
        every job of ``kind`` reconciled again, loaded afresh (it may name that object)."""
        body = event.get("object") or {}
        if event.get("type") == "DELETED":
            assert extra.forget is not None
            extra.forget(body)
        else:
            self.known_object(extra, body)
        if self._reconciler is None:
            return  # not started: the first passes load every job anyway
        plurals = {plural for (_, plural), r in self.resources.items() if r.kind == kind}
        for key in self._reconciler.reload(plurals):
            self._enqueue(key)

    def _enqueue(self, key: JobKey) -> None:
        self.queue.add(key)

    def probe(self) -> dict[str, Any]:
        return {"leading": self.leading, "queued": len(self.queue)}

    # -- workers -------------------------------------------------------------------------------

    async def _work(self) -> None:
        assert self._reconciler is not None and self._controller_loop is not None
        while True:
            key = await self.queue.get()
            try:
                if self._controller_loop.handles(key):
                    delay = await self._controller_loop.reconcile(key)
                else:
                    delay = await self._reconciler.reconcile(key)
            except RetryLater as exc:
                backoff = self.queue.retry(key)
                log = logger.error if exc.blocked else logger.warning
                log("%s/%s: retrying in %.1fs: %s", key[2], key[3], backoff, exc)
            except asyncio.CancelledError:
                raise
            except Exception:
                backoff = self.queue.retry(key)
                logger.exception(
                    "%s/%s: reconcile failed; retrying in %.1fs", key[2], key[3], backoff
                )
            else:
                self.queue.forget(key)
                if delay is not None:
                    self.queue.add_after(key, delay)
            finally:
                self.queue.done(key)
