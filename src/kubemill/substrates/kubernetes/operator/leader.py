"""Leader election over a ``coordination.k8s.io/v1`` Lease, so several replicas can run safely.

The protocol is client-go's: a replica reads the Lease every ``retry_period`` and takes it
when it is missing (create) or when its holder has not renewed it for ``lease_duration``
(measured on this replica's own clock, from when it last saw the Lease change, so clocks
that disagree do not matter); the leader renews it every ``retry_period`` and, when no
renewal succeeded for ``renew_deadline``, stops leading. Every write is a PUT at the
``resourceVersion`` just read: of two replicas racing for the same Lease, the API server
lets one win (``409 Conflict`` for the other). It runs as a task on the operator's event
loop, its requests through the operator's :class:`~.kubeapi.KubeApi`.

Why a Lease rather than kopf peering: kopf pauses its own watches on peering, but the
reconcile workers and their timers belong to kubemill and would keep writing; and kopf
peering needs a distinct priority per replica plus its own CRDs. With a Lease every
replica keeps its watches and caches warm, only the leader reconciles, and a replica that
loses the Lease exits (its pod restarts as a follower), as Kubernetes' own controllers do.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubemill.substrates.kubernetes.operator.kubeapi import ApiError, KubeApi, ObjectRef

logger = logging.getLogger("kubemill.operator")

LEASE_API = "coordination.k8s.io/v1"


def timings(lease_duration: int) -> tuple[int, int, int]:
    """(lease duration, renew deadline, retry period) in seconds, client-go's 15/10/2 shape."""
    duration = max(3, lease_duration)
    renew = max(2, duration * 2 // 3)
    retry = max(1, duration // 7)
    return duration, renew, retry


def micro_time(moment: float) -> str:
    """``moment`` (seconds since the epoch) as the API's MicroTime."""
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Campaigns for the Lease, then keeps it; calls back when leading starts and stops."""

    def __init__(
        self,
        api: KubeApi,
        *,
        name: str,
        namespace: str,
        identity: str,
        lease_duration: int,
        on_started: Callable[[], None],
        on_stopped: Callable[[], None],
    ) -> None:
        self._api = api
        self._ref = ObjectRef(LEASE_API, "leases", namespace, name)
        self._identity = identity
        self._duration, self._renew_deadline, self._retry = timings(lease_duration)
        self._on_started = on_started
        self._on_stopped = on_stopped
        self._task: asyncio.Task[None] | None = None
        # What this replica last saw of the Lease, and when (its own monotonic clock).
        self._observed: dict[str, Any] | None = None
        self._observed_at = 0.0

    def start(self) -> None:
        """Run the election as a task of the running event loop."""
        self._task = asyncio.create_task(self._run(), name="kubemill-leader")

    async def stop(self) -> None:
        """Stop campaigning or renewing (the Lease is left to expire, as before)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        logger.info("waiting for the lease %s/%s", self._ref.namespace, self._ref.name)
        try:
            while not await self._attempt(self._retry):
                await asyncio.sleep(self._retry)
            logger.info(
                "%s leads (lease %s/%s)", self._identity, self._ref.namespace, self._ref.name
            )
            self._on_started()
            renewed = time.monotonic()
            while True:
                await asyncio.sleep(self._retry)
                left = renewed + self._renew_deadline - time.monotonic()
                if left > 0 and await self._attempt(left):
                    renewed = time.monotonic()
                elif time.monotonic() >= renewed + self._renew_deadline:
                    break
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("leader election failed")
        self._on_stopped()

    async def _attempt(self, within: float) -> bool:
        """Take or renew the Lease, giving up after ``within`` seconds; whether it holds."""
        try:
            return await asyncio.wait_for(self._acquire_or_renew(), timeout=within)
        except TimeoutError:
            logger.warning("lease %s: no answer within %.1f s", self._ref, within)
            return False
        except ApiError as exc:
            logger.warning("lease %s: %s", self._ref, exc)
            return False

    async def _acquire_or_renew(self) -> bool:
        now = time.time()
        try:
            lease = await self._api.read(self._ref)
        except ApiError as exc:
            if exc.status != 404:
                raise
            created = await self._api.create(self._ref, self._lease(now, now, 0, None))
            self._observe(created)
            return True
        spec = lease.get("spec") or {}
        if spec != (self._observed or {}).get("spec"):
            self._observe(lease)
        holder = spec.get("holderIdentity") or ""
        if holder == self._identity:
            acquired, transitions = spec.get("acquireTime"), int(spec.get("leaseTransitions") or 0)
        else:
            expires = self._observed_at + float(spec.get("leaseDurationSeconds") or self._duration)
            if holder and time.monotonic() < expires:
                return False  # another replica holds it and renews it
            acquired, transitions = None, int(spec.get("leaseTransitions") or 0) + 1
        version = str((lease.get("metadata") or {}).get("resourceVersion") or "")
        body = self._lease(now, acquired or now, transitions, version)
        self._observe(await self._api.replace(self._ref, body))
        return True

    def _observe(self, lease: dict[str, Any]) -> None:
        self._observed = lease
        self._observed_at = time.monotonic()

    def _lease(
        self, now: float, acquired: float | str, transitions: int, version: str | None
    ) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self._ref.name, "namespace": self._ref.namespace}
        if version:
            metadata["resourceVersion"] = version  # only the version read: else 409 Conflict
        return {
            "apiVersion": LEASE_API,
            "kind": "Lease",
            "metadata": metadata,
            "spec": {
                "holderIdentity": self._identity,
                "leaseDurationSeconds": self._duration,
                "acquireTime": acquired if isinstance(acquired, str) else micro_time(acquired),
                "renewTime": micro_time(now),
                "leaseTransitions": transitions,
            },
        }
