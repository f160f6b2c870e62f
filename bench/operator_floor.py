"""The floor under the operator's cost: kopf alone, with handlers that do nothing, watching
what the operator watches with the operator's kopf settings; and, in its writing mode, kopf
plus the writes every job needs at a minimum, made through the operator's own API client.

Not run by hand: ``bench/operator_throughput.py`` runs it. Its argument is a JSON object
(the bench builds it from the operator's own modules)::

    python bench/operator_floor.py '{"health": PORT, "idle_timeout": S, "gc_young": N,
        "resources": [[GROUP, VERSION, PLURAL, LABEL_SELECTOR_OR_NULL], ...],
        "writes": null | {...}}'

Each resource gets an index that keeps nothing and an ``on.event`` handler that does
nothing, both coroutines (as the operator's: no hop to kopf's thread pool); kopf logs in
with the kubeconfig in ``$KUBECONFIG``.

Without ``writes`` it makes no request of its own: the bench runs it beside the operator in
the same run (``--no-floor`` to skip), so that both see the same events, and what the
operator costs above it is kubemill's, the writes included.

With ``writes`` (``operator_throughput.py --floor-writes``) it is the honest floor: on the
first event of each job of the resource ``job`` names (the bench's TFJobs) it makes that job's
minimal writes, those the operator's first pass makes and no more: its pods and services
(the bodies the operator builds, rendered once by the bench from kubemill's own build
functions, the job's name, namespace and uid put in), all at once as the operator's one
creation wave; one JSON merge patch of the job's status (the operator's first status, the
``Created`` condition, at the resourceVersion of the event); and the operator's Events of
that pass. They go through the operator's client code, constructed as the operator
constructs it: :class:`~kubemill.substrates.kubernetes.operator.kubeapi.KubeApi` (kubemill's
HTTP pool, on its thread pool of ``api_concurrency`` threads, a hop there and back for each
request) and :class:`~kubemill.substrates.kubernetes.operator.events.EventPoster` (its
background queue and tasks), with ``workers`` tasks taking jobs off a queue as the
operator's reconcile workers do. So the client's cost is in the floor, and what the operator
costs above it is kubemill's reconcile logic alone. Its children and status writes are seen
by whatever watches the cluster, so it must run without the operator (and the operator
without it): the bench runs it in a run of its own, against a fresh server, with the same
jobs.

The requests are the operator's, byte for byte but for what is each process's or each
moment's: an Event's name suffix and ``reportingInstance``, the times, and the order of the
names in a coalesced Event's message (the operator's: the order its creates were answered;
the floor's: the order it sent them). What the floor does not do is kubemill's: loading
and planning the job, the core's decision, building the bodies, the caches and indexes of
pods, services and jobs, the expectations, and the later passes each child's event wakes
(which write nothing). A write answered with no answer, 429 or 5xx is tried again a few
times (the operator tries again too, by a later pass); any other error is logged (the floor
log) and the bench's count of writes shows it.

``writes`` holds::

    {"job": [GROUP, VERSION, PLURAL],
     "template": JSON text of {"waves": [[[API_VERSION, PLURAL, BODY], ...], ...],
                               "status": MERGE_PATCH, "events": [[TYPE, REASON, MESSAGE], ...]},
     "name": N, "namespace": NS, "uid": U, "stamp": T,   # the placeholders in the template
     "api_concurrency": C, "workers": W, "identity": I}
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import json
import logging
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

# As the operator's entry does: kopf imports the kubernetes package's models when it can.
sys.modules.setdefault("kubernetes", None)  # type: ignore[arg-type]

import kopf  # noqa: E402

if TYPE_CHECKING:
    from kubemill.substrates.kubernetes.operator.events import EventPoster
    from kubemill.substrates.kubernetes.operator.kubeapi import KubeApi

CLIENT_MODULES = (
    "kubemill.substrates.kubernetes.operator.kubeapi",
    "kubemill.substrates.kubernetes.operator.events",
)
"""The operator's client code, imported by the writing floor only (before the collector's
freeze, as the operator's imports are): kopf alone imports nothing of kubemill's."""

logger = logging.getLogger("kubemill.floor")

RETRIES = (0.5, 1.0, 2.0, 4.0)
"""Seconds before each new try of a write answered with no answer, 429 or 5xx (the
operator retries those too, later and by a new pass); any other error is logged."""


class _NoDiffBase(kopf.DiffBaseStorage):
    """No diff base, as the operator keeps none (it has no ``on.update`` handlers)."""

    def build(self, *, body: Any, extra_fields: Any = None) -> Any:
        return {}

    def fetch(self, *, body: Any) -> Any:
        return None

    def store(self, *, body: Any, patch: Any, essence: Any) -> None:
        return None


class _NoProgress(kopf.ProgressStorage):
    """No handler progress, as the operator keeps none."""

    def fetch(self, *, key: Any, body: Any) -> Any:
        return None

    def store(self, *, key: Any, record: Any, body: Any, patch: Any) -> None:
        return None

    def purge(self, *, key: Any, body: Any, patch: Any) -> None:
        return None

    def touch(self, *, body: Any, patch: Any, value: Any) -> None:
        return None

    def clear(self, *, essence: Any) -> Any:
        return essence


async def _nothing_indexed(**_: Any) -> dict[str, None]:
    return {}


async def _nothing_done(**_: Any) -> None:
    return None


class Writer:
    """A job's minimal writes, on its first event, through the operator's API client."""

    def __init__(self, spec: dict[str, Any], api_version: str, plural: str) -> None:
        self._spec = spec
        self._api_version = api_version
        self._plural = plural
        self._seen: set[str] = set()
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._api: KubeApi | None = None
        self._events: EventPoster | None = None
        self._workers: list[asyncio.Task[None]] = []

    async def start(self, **_: Any) -> None:
        """As the operator's start: its client, its Event poster, its workers."""
        from kubemill.substrates.kubernetes.operator.events import EventPoster
        from kubemill.substrates.kubernetes.operator.kubeapi import (
            KubeApi,
            load_client_configuration,
        )

        configuration = load_client_configuration(context=None)
        self._api = KubeApi(configuration, concurrency=self._spec["api_concurrency"])
        self._events = EventPoster(self._api, instance=self._spec["identity"])
        self._events.start()
        self._workers = [
            asyncio.create_task(self._work(), name=f"floor-writer-{i}")
            for i in range(self._spec["workers"])
        ]

    async def stop(self, **_: Any) -> None:
        for task in self._workers:
            task.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        if self._events is not None:
            await self._events.flush(timeout=5.0)
            await self._events.stop()
        if self._api is not None:
            self._api.close()

    async def job_event(self, event: Any, **_: Any) -> None:
        """The job's first event queues its writes; every later one does nothing."""
        body = event.get("object") or {}
        meta = body.get("metadata") or {}
        uid = meta.get("uid")
        if event.get("type") == "DELETED" or not uid or uid in self._seen:
            return
        if meta.get("deletionTimestamp"):
            return
        self._seen.add(uid)
        self._queue.put_nowait(body)

    async def _work(self) -> None:
        while True:
            body = await self._queue.get()
            try:
                await self._write(body)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("writing for %s failed", body.get("metadata", {}).get("name"))
            finally:
                self._queue.task_done()

    async def _write(self, job: dict[str, Any]) -> None:
        from kubemill.substrates.kubernetes.operator.kubeapi import ObjectRef

        assert self._api is not None and self._events is not None
        api = self._api
        spec = self._spec
        meta = job["metadata"]
        name, namespace = meta["name"], meta["namespace"]
        stamp = datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        text = spec["template"]
        for placeholder, value in (
            (spec["name"], name),
            (spec["namespace"], namespace),
            (spec["uid"], meta["uid"]),
            (spec["stamp"], stamp),
        ):
            text = text.replace(placeholder, value)
        writes = json.loads(text)
        for wave in writes["waves"]:  # each at once, as the operator's creation waves
            await asyncio.gather(
                *(
                    self._retrying(
                        partial(
                            api.create,
                            ObjectRef(api_version, plural, namespace, child["metadata"]["name"]),
                            child,
                            answer=False,
                        )
                    )
                    for api_version, plural, child in wave
                )
            )
        ref = ObjectRef(self._api_version, self._plural, namespace, name)
        version = meta.get("resourceVersion") or None
        await self._retrying(
            partial(api.patch_status, ref, writes["status"], resource_version=version)
        )
        for type_, reason, message in writes["events"]:
            self._events.post(job, type_, reason, message)

    async def _retrying(self, call: Callable[[], Awaitable[object]]) -> None:
        from kubemill.substrates.kubernetes.operator.kubeapi import ApiError

        for delay in (*RETRIES, None):
            try:
                await call()
                return
            except ApiError as exc:
                transient = exc.status == 0 or exc.status == 429 or exc.status >= 500
                if delay is None or not transient:
                    logger.warning("floor write failed: %s", exc)
                    return
                await asyncio.sleep(delay)


def main() -> None:
    spec = json.loads(sys.argv[1])
    registry = kopf.OperatorRegistry()
    settings = kopf.OperatorSettings()
    writes = spec.get("writes")
    if writes:
        for module in CLIENT_MODULES:
            importlib.import_module(module)
    for number, (group, version, plural, selector) in enumerate(spec["resources"]):
        where = (group, version, plural) if group else (version, plural)
        labels = {selector: kopf.PRESENT} if selector else None
        kopf.index(*where, registry=registry, id=f"index-{number}", labels=labels)(_nothing_indexed)
        handler: Any = _nothing_done
        if writes and [group, version, plural] == writes["job"]:
            writer = Writer(writes, f"{group}/{version}" if group else version, plural)
            kopf.on.startup(registry=registry)(writer.start)
            kopf.on.cleanup(registry=registry)(writer.stop)
            handler = writer.job_event
        kopf.on.event(*where, registry=registry, id=f"event-{number}", labels=labels)(handler)
        if selector:
            settings.watching.label_selectors[group or version, plural] = selector
    kopf.on.login(registry=registry)(kopf.login_with_kubeconfig)
    settings.scanning.disabled = True
    settings.posting.enabled = False
    settings.peering.standalone = True
    settings.persistence.diffbase_storage = _NoDiffBase()
    settings.persistence.progress_storage = _NoProgress()
    settings.queueing.idle_timeout = spec["idle_timeout"]
    kopf.configure(verbose=False)
    # The operator's collector settings (kubemill.substrates.kubernetes.operator.process).
    gc.freeze()
    gc.set_threshold(spec["gc_young"], *gc.get_threshold()[1:])
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    asyncio.run(
        kopf.operator(
            registry=registry,
            settings=settings,
            standalone=True,
            clusterwide=True,
            liveness_endpoint=f"http://127.0.0.1:{spec['health']}/healthz",
        )
    )


if __name__ == "__main__":
    main()
