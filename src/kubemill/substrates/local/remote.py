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
import urllib.error
import urllib.request
from urllib.parse import urlsplit

from kubemill.core import ObservedPod
from kubemill.frameworks import Plan, RemoteReport, RemoteRun

log = logging.getLogger("kubemill.local.remote")

TIMEOUT = 2.0
"""Seconds one request may take (the service is on this machine)."""

MAX_BODY = 1 << 20
"""The most of an answer read: a job API's status is a small JSON object."""


class RemoteError(Exception):
    """A request that was not sent (not an http URL on loopback)."""


def _request(url: str, data: bytes | None = None) -> urllib.request.Request:
    """A request to ``url``, which must be ``http://`` to a loopback address."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        local = ipaddress.ip_address(host).is_loopback
    except ValueError:
        local = host == "localhost"
    if parts.scheme != "http" or not local:
        raise RemoteError(f"{url}: not http on loopback; the local substrate asks nothing else")
    if data is None:
        return urllib.request.Request(url)  # noqa: S310 - http on loopback, checked above
    headers = {"Content-Type": "application/json"}
    return urllib.request.Request(url, data=data, method="POST", headers=headers)  # noqa: S310


def _open(request: urllib.request.Request) -> tuple[int, bytes]:
    """(status, body) of one request; an HTTP error status is an answer too."""
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:  # noqa: S310
            return int(response.status), response.read(MAX_BODY)
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read(MAX_BODY)


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
            status, body = _open(_request(self.remote.status_url))
        except (OSError, RemoteError) as exc:
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
        data = json.dumps(dict(self.remote.submit_body)).encode()
        self._next = 0.0
        try:
            status, body = _open(_request(self.remote.submit_url, data))
        except (OSError, RemoteError) as exc:
            return f"{self.remote.submit_url}: {exc}"
        if status >= 300:
            words = body.decode(errors="replace").strip()[:500]
            return f"{self.remote.submit_url} answered {status}: {words}"
        return None
