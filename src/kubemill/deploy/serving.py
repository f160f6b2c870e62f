"""Waiting until a service cluster serves (any service engine's: Ready with an endpoint), or
knowing it will not: the one wait of ``kubemill cluster create``, ``kubemill run`` of a
service, and the local ``new_cluster``.

:func:`wait_serving` polls the job through the SDK's :class:`~kubemill.sdk.JobClient` until the
core judges it Ready with an endpoint in its status, and raises :class:`NotServing` when it
ended first, when a replica keeps failing (:data:`CRASH_RESTARTS` restarts before Ready: an
environment without the engine crashes every start, and waiting on would only hide why), or
at the timeout. The cluster is left as it is: the caller decides whether it stays.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kubemill.api import ConditionType
from kubemill.sdk import JobClient
from kubemill.substrates.base import JobView

POLL_SECONDS = 0.25
"""How often the job is read while waiting."""
CRASH_RESTARTS = 3
"""A replica restarted this often before the cluster is Ready is reported, not waited on."""


class NotServing(Exception):
    """The cluster ended, keeps failing, or did not get Ready in time; the message says
    which. ``failing`` names the replica that keeps failing, if that is why."""

    def __init__(self, message: str, *, failing: str | None = None) -> None:
        super().__init__(message)
        self.failing = failing


def wait_serving(
    client: JobClient,
    name: str,
    namespace: str | None,
    *,
    timeout: float | None,
    progress: Callable[[str], None] | None = None,
) -> JobView:
    """The job once the core judges it Ready with an endpoint; :class:`NotServing` if it
    finishes first, a replica keeps failing or ``timeout`` seconds pass (None: no limit).
    ``progress`` is given the Ready condition's message whenever it changes."""
    deadline = None if timeout is None else time.monotonic() + timeout
    said = ""
    while True:
        view = client.get(name, namespace=namespace)
        ready = view.status.condition(ConditionType.READY)
        if ready is not None and ready.status == "True" and getattr(view.status, "endpoint", None):
            return view
        if view.finished:
            last = view.status.conditions[-1].message if view.status.conditions else ""
            raise NotServing(f"{view.kind} {name} ended {view.phase} before it was ready: {last}")
        crashing = [r for r in view.replicas if r.restarts >= CRASH_RESTARTS]
        if crashing:
            first = crashing[0]
            raise NotServing(
                f"{view.kind} {name} is not ready: replica {first.name} keeps failing"
                f" ({first.restarts} restarts, last exit code {first.exit_code});"
                f" see `kubemill logs {name} --replica {first.name}`",
                failing=first.name,
            )
        if deadline is not None and time.monotonic() >= deadline:
            why = ready.message if ready is not None else f"it is {view.phase}"
            counts = getattr(view.status, "ready_replicas", None) or {}
            if counts:
                why += " (ready: " + ", ".join(f"{n} {t}" for t, n in counts.items()) + ")"
            raise NotServing(f"{view.kind} {name} is not ready after {timeout:g} s: {why}")
        if progress is not None and ready is not None and ready.message != said:
            said = ready.message
            progress(said)
        time.sleep(POLL_SECONDS)


__all__ = ["CRASH_RESTARTS", "POLL_SECONDS", "NotServing", "wait_serving"]
