"""Reading (and submitting) a Plan's remote run through its service's own API, locally.

A Plan with a :class:`~kubemill.frameworks.RemoteRun` hands its program to a service the
job brings up (a Ray job on the job's Ray head); the service's API says how it ends. The
supervisor asks it here, at a bounded rate and only while the service is up, and hands
what it answered to the core as :class:`~kubemill.frameworks.RemoteReport` (a JSON object,
or "not known"), which judges it. This module decides nothing: an answer that is neither
(the service not answering yet, a 5xx) is no news, and the last report stands.

Locally every address is the job's own on loopback; a URL to any other host is refused
rather than asked, so nothing here sends traffic off the machine.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import time
from typing import Any
from urllib.parse import urlsplit

from kubemill import http_client
from kubemill.core import ObservedPod
from kubemill.frameworks import Plan, RemoteReport, RemoteRun
from kubemill.version import __version__

log = logging.getLogger("kubemill.local.remote")

TIMEOUT = (2.0, 2.0)
"""(connect, read) seconds one request may take (the service is on this machine)."""

USER_AGENT = f"kubemill/{__version__}"


class RemoteError(Exception):
    """A request that was not sent (not an http URL on loopback)."""


def _ask(url: str, body: Any = None) -> tuple[int, bytes]:
    """(status, body) of a GET of ``url``, or a POST of the JSON ``body``; ``url`` must be
    ``http://`` to a loopback address. An HTTP error status is an answer too; no answer
    raises :class:`~kubemill.http_client.NoAnswer`."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        local = ipaddress.ip_address(host).is_loopback
    except ValueError:
        local = host == "localhost"
    if parts.scheme != "http" or not local:
        raise RemoteError(f"{url}: not http on loopback; the local substrate asks nothing else")
    method = "GET" if body is None else "POST"
    try:
        answer = http_client.request(method, url, body=body, user_agent=USER_AGENT, timeout=TIMEOUT)
    except http_client.HttpAnswer as refused:
        data = refused.body if isinstance(refused.body, bytes) else b""
        return refused.status, data
    return answer.status, answer.data


def remote_watch(plan: Plan, interval: float) -> RemoteWatch | None:
    """The reader of ``plan``'s remote run (None: it has none)."""
    return RemoteWatch(plan.remote, interval=interval) if plan.remote is not None else None


class RemoteWatch:
    """The supervisor's reader of one Plan's remote run."""

    def __init__(self, remote: RemoteRun, *, interval: float) -> None:
        self.remote = remote
        self.interval = interval
        self.report: RemoteReport | None = None
        self._next = 0.0

    def read(self, pods: tuple[ObservedPod, ...]) -> RemoteReport | None:
        """The latest report, asked for now if due and the service is up (its ``after``
        replica Running and ready among ``pods``)."""
        after = self.remote.after
        up = any(p.name == after and p.phase == "Running" and p.ready for p in pods)
        return self.poll(time.monotonic(), service_up=up)

    def poll(self, now: float, *, service_up: bool) -> RemoteReport | None:
        """The latest report: the API asked again once ``interval`` has passed since the
        last time, while ``service_up`` (its ``after`` replica Running and ready)."""
        if not service_up or now < self._next:
            return self.report
        self._next = now + self.interval
        try:
            status, body = _ask(self.remote.status_url)
        except (http_client.NoAnswer, RemoteError) as exc:
            log.debug("%s: %s", self.remote.status_url, exc)
            return self.report
        if status == 404:
            self.report = RemoteReport(found=False)
        elif status == 200:
            try:
                parsed = json.loads(body)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                self.report = RemoteReport(found=True, body=parsed)
            else:
                log.warning("%s answered what is not a JSON object", self.remote.status_url)
        return self.report

    def submit(self) -> str | None:
        """POST the run to the service; why it failed (None: it was taken). The next
        :meth:`poll` asks at once, so the submission is seen without a wait."""
        self._next = 0.0
        try:
            status, body = _ask(self.remote.submit_url, dict(self.remote.submit_body))
        except (http_client.NoAnswer, RemoteError) as exc:
            return f"{self.remote.submit_url}: {exc}"
        if status >= 300:
            words = body.decode(errors="replace").strip()[:500]
            return f"{self.remote.submit_url} answered {status}: {words}"
        return None
