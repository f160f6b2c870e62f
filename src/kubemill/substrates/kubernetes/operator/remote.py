"""The operator's reader of jobs' remote runs (a Ray job, through its head's job API): what
the local supervisor does with the same :class:`~kubemill.substrates.remote.RemoteWatch`,
in a cluster.

For a job whose Plan has a :class:`~kubemill.frameworks.RemoteRun`, each pass asks the
service for the run's status, at most every ``interval`` seconds and only while the run's
``after`` pod is Running and ready, at that pod's ``status.podIP`` (the operator reaches pods
directly; the head Service's DNS name would need the cluster's DNS, which the operator does
not use). The answer goes to the core as ``Observed.remote``; when the core asks
(``SubmitRemote``), the run is POSTed to the same pod, and a refusal is a
``FailedSubmission`` event. The requests block, so they are made in a thread
(:func:`asyncio.to_thread`), never on kopf's event loop. While a run is followed the job is
looked at again every ``interval``. Nothing here decides: the core judges what the service
answered.

A run whose service wants a credential (:attr:`~kubemill.frameworks.RemoteRun.
bearer_token`: a Ray head with token authentication) is sent the token of the Secret the
operator made of that secret file set, read from the API once (``read_secret``) and kept
for the job's reader; until the Secret can be read the service is not asked (it would only
refuse). The token is never logged.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

from kubemill.core import Observed, ReconcileResult, SubmitRemote
from kubemill.frameworks import Plan, RemoteRun, SecretFile
from kubemill.substrates.kubernetes.observe import PodSnapshot
from kubemill.substrates.kubernetes.operator.caches import JobKey
from kubemill.substrates.kubernetes.operator.kubeapi import ApiError
from kubemill.substrates.kubernetes.operator.writes import EventPoster
from kubemill.substrates.remote import RemoteWatch

INTERVAL = 1.0
"""Seconds between two asks of one run's status (a pass in between reuses the last answer)."""

log = logging.getLogger("kubemill.remote")

SecretReader = Callable[[str, str], Awaitable[Mapping[str, Any]]]
"""Reads the Secret (namespace, name) from the API: its body (:class:`ApiError` or
:class:`LookupError` if it cannot)."""


async def _no_secrets(namespace: str, name: str) -> Mapping[str, Any]:
    raise LookupError(f"secrets {namespace}/{name}: no reader of Secrets was given")


class RemoteRuns:
    """Every job's remote-run reader, by job key (one pass at a time per key, as the work
    queue runs them)."""

    def __init__(
        self,
        post_event: EventPoster,
        *,
        interval: float = INTERVAL,
        read_secret: SecretReader = _no_secrets,
    ) -> None:
        self.interval = interval
        self._post_event = post_event
        self._read_secret = read_secret
        self._watches: dict[JobKey, RemoteWatch] = {}
        self._hosts: dict[JobKey, str] = {}
        self._tokens: dict[JobKey, str] = {}

    def forget(self, key: JobKey) -> None:
        """The job is gone: drop its reader (and the token it had)."""
        self._watches.pop(key, None)
        self._hosts.pop(key, None)
        self._tokens.pop(key, None)

    async def _credential(self, key: JobKey, secret: SecretFile) -> bool:
        """Whether the job's token is at hand, read from its Secret if not yet."""
        if key in self._tokens:
            return True
        namespace = key[2]
        try:
            body = await self._read_secret(namespace, secret.file_set)
            encoded = (body.get("data") or {})[secret.file]
            token = base64.b64decode(encoded, validate=True).decode("utf-8").strip()
        except (ApiError, LookupError, ValueError) as exc:  # ValueError: not base64, not UTF-8
            # Not made yet, or unreadable: the service is asked once it is.
            log.debug("secrets %s/%s: %s", namespace, secret.file_set, type(exc).__name__)
            return False
        if not token:
            return False
        self._tokens[key] = token
        return True

    async def observe(
        self, key: JobKey, plan: Plan, pods: list[PodSnapshot], observed: Observed
    ) -> Observed:
        """``observed`` with the latest report of ``plan``'s remote run (unchanged for a
        Plan without one), the service asked now if due and its ``after`` pod is up."""
        remote = plan.remote
        if remote is None:
            self.forget(key)
            return observed
        watch = self._watches.get(key)
        if watch is None or _run_of(watch.remote) != _run_of(remote):
            # A new run (another job of the same name, a changed spec): nothing known of it.
            self._tokens.pop(key, None)
            watch = self._watches[key] = RemoteWatch(
                remote, interval=self.interval, credential=lambda: self._tokens.get(key)
            )
        watch.remote = remote  # the same run; another job's service may have moved
        # Another job's service is where the Plan says (no pod of this job to stamp it).
        found = (
            ((remote.host, "") if remote.host else None)
            if not remote.after
            else (_address(remote.after, pods))
        )
        if found is None:
            self._hosts.pop(key, None)
        elif remote.bearer_token is None or await self._credential(key, remote.bearer_token):
            host, uid = found
            self._hosts[key] = host
            if watch.due(time.monotonic()):
                await asyncio.to_thread(watch.ask_status, host, uid)
        return replace(observed, remote=watch.report)

    async def submit(
        self, key: JobKey, raw: Mapping[str, Any], result: ReconcileResult
    ) -> ReconcileResult:
        """Carry out the core's ``SubmitRemote`` (POST the run to its service, at the
        address this pass read it at): ``result`` without it, for the rest to apply."""
        if not any(isinstance(action, SubmitRemote) for action in result.actions):
            return result
        watch, host = self._watches.get(key), self._hosts.get(key)
        if watch is None or host is None:
            failed: str | None = "the service's pod has no address yet"
        else:
            failed = await asyncio.to_thread(watch.submit, host)
        if failed is not None:
            self._post_event(raw, "Warning", "FailedSubmission", failed[:1000])
        actions = tuple(a for a in result.actions if not isinstance(a, SubmitRemote))
        return replace(result, actions=actions)

    def requeue(self, key: JobKey, result: ReconcileResult) -> float | None:
        """Seconds until the job's next pass: the core's ``requeue_after`` (a second more,
        for the caches to show the writes), or the poll interval if sooner while the job's
        run is followed (its service up, the job not finished)."""
        after = result.requeue_after
        delay = None if after is None else max(after.total_seconds(), 0.0) + 1.0
        if key not in self._hosts or result.status.finished:
            return delay
        return self.interval if delay is None else min(delay, self.interval)


def _run_of(remote: RemoteRun) -> RemoteRun:
    """The run itself, without where another job's service is found now."""
    return replace(remote, host="", lost=None)


def _address(after: str, pods: list[PodSnapshot]) -> tuple[str, str] | None:
    """(pod IP, uid) of the pod ``after`` while it is Running and ready (None otherwise)."""
    for pod in pods:
        if pod.name == after and pod.phase == "Running" and pod.ready and not pod.deleting:
            return (pod.pod_ip, pod.uid) if pod.pod_ip else None
    return None


__all__ = ["INTERVAL", "RemoteRuns", "SecretReader"]
