"""Kubernetes Events on jobs, posted in the background so a reconcile never waits for them.

``core/v1`` Events with the job as ``involvedObject`` (what ``kubectl describe`` and
``kubemill describe`` read). kopf has its own poster (``kopf.event``), but it only works
inside kopf's per-object handler tasks, not from the operator's reconcile workers.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from kubemill.substrates.kubernetes.operator.kubeapi import ApiError, KubeApi, ObjectRef

logger = logging.getLogger("kubemill.operator")

COMPONENT = "kubemill-operator"
_SEQUENCE = itertools.count()
MAX_QUEUED = 10_000
"""Events waiting to be posted beyond this are dropped (and logged): the operator must not
grow without bound when the API server refuses events."""


def build_event(
    job: Mapping[str, Any],
    *,
    type: str,
    reason: str,
    message: str,
    instance: str,
    now: datetime,
) -> dict[str, Any]:
    """The Event object for one decision about ``job``."""
    meta = job.get("metadata", {})
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            # As client-go names them: the object's name and a unique hex suffix.
            "name": f"{meta.get('name')}.{time.time_ns():x}{next(_SEQUENCE):x}",
            "namespace": meta.get("namespace"),
        },
        "involvedObject": {
            "apiVersion": job.get("apiVersion"),
            "kind": job.get("kind"),
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
        },
        "type": type,
        "reason": reason,
        "message": message,
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": instance,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


class EventPoster:
    """A queue of Events and the task that posts them."""

    def __init__(self, api: KubeApi, *, instance: str, concurrency: int = 4) -> None:
        self._api = api
        self._instance = instance
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=MAX_QUEUED)
        self._concurrency = concurrency
        self._tasks: list[asyncio.Task[None]] = []

    def post(self, job: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        """Queue an event on ``job`` (never blocks, never raises)."""
        event = build_event(
            job,
            type=type,
            reason=reason,
            message=message,
            instance=self._instance,
            now=datetime.now(tz=UTC),
        )
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            logger.warning("event dropped (queue full): %s %s", reason, message)

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._post_forever(), name=f"kubemill-events-{i}")
            for i in range(self._concurrency)
        ]

    async def flush(self, timeout: float) -> None:
        """Wait (at most ``timeout`` s) until the queued events are posted."""
        try:
            await asyncio.wait_for(self._queue.join(), timeout)
        except TimeoutError:
            logger.warning("%d events not posted at exit", self._queue.qsize())

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _post_forever(self) -> None:
        while True:
            event = await self._queue.get()
            meta = event["metadata"]
            ref = ObjectRef("v1", "events", meta["namespace"], meta["name"])
            try:
                for delay in (0.5, 2.0, None):
                    try:
                        await self._api.create(ref, event, answer=False)
                        break
                    except ApiError as exc:
                        if delay is None or exc.status in (400, 403, 404, 409, 422):
                            logger.warning("event not posted: %s", exc)
                            break
                        await asyncio.sleep(delay)
            finally:
                self._queue.task_done()
