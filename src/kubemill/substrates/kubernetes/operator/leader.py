"""Leader election over a ``coordination.k8s.io`` Lease, so several replicas can run safely.

The official client's ``kubernetes.leaderelection`` does the protocol (create or take over
an expired Lease, renew it every ``retry_period``, give up after ``renew_deadline``); it is
blocking, so it runs on a thread of its own and reports to the operator's event loop.

Why a Lease rather than kopf peering: kopf pauses its own watches on peering, but the
reconcile workers and their timers belong to kubemill and would keep writing; and kopf
peering needs a distinct priority per replica plus its own CRDs. With a Lease every
replica keeps its watches and caches warm, only the leader reconciles, and a replica that
loses the Lease exits (its pod restarts as a follower), as Kubernetes' own controllers do.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("kubemill.operator")


def timings(lease_duration: int) -> tuple[int, int, int]:
    """(lease duration, renew deadline, retry period) in seconds, client-go's 15/10/2 shape."""
    duration = max(3, lease_duration)
    renew = max(2, duration * 2 // 3)
    retry = max(1, duration // 7)
    return duration, renew, retry


class LeaderElector:
    """Runs the election on a daemon thread; calls back when leading starts and stops."""

    def __init__(
        self,
        configuration: Any,
        *,
        name: str,
        namespace: str,
        identity: str,
        lease_duration: int,
        on_started: Callable[[], None],
        on_stopped: Callable[[], None],
    ) -> None:
        self._configuration = configuration
        self._name = name
        self._namespace = namespace
        self._identity = identity
        self._lease_duration = lease_duration
        self._on_started = on_started
        self._on_stopped = on_stopped
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="kubemill-leader", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from kubernetes import client
        from kubernetes.leaderelection import electionconfig, leaderelection
        from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

        # LeaseLock builds its CoordinationV1Api from the default configuration.
        client.Configuration.set_default(self._configuration)
        duration, renew, retry = timings(self._lease_duration)
        lock = LeaseLock(self._name, self._namespace, self._identity)  # type: ignore[no-untyped-call]
        config = electionconfig.Config(  # type: ignore[no-untyped-call]
            lock,
            lease_duration=duration,
            renew_deadline=renew,
            retry_period=retry,
            onstarted_leading=self._started,
            onstopped_leading=self._on_stopped,
        )
        logger.info("waiting for the lease %s/%s", self._namespace, self._name)
        try:
            election = leaderelection.LeaderElection(config)  # type: ignore[no-untyped-call]
            election.run()  # type: ignore[no-untyped-call]
        except Exception:
            logger.exception("leader election failed")
            self._on_stopped()

    def _started(self) -> None:
        logger.info("%s leads (lease %s/%s)", self._identity, self._namespace, self._name)
        self._on_started()
