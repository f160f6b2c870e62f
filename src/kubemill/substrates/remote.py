"""Reading (and submitting) a Plan's remote run through its service's own API, on any
substrate.

A Plan with a :class:`~kubemill.frameworks.RemoteRun` hands its program to a service the
job brings up (a Ray job on the job's Ray head); the service's API says how it ends. A
substrate asks it through a :class:`RemoteWatch`, at a bounded rate (:meth:`RemoteWatch.due`)
and only while the service is up (its ``after`` replica Running and ready), at the address
the substrate knows that replica by (locally the loopback address, on Kubernetes the pod's
IP), with the run's credential if it has one (a bearer token the substrate generated and
reads, :attr:`~kubemill.frameworks.RemoteRun.bearer_token`), and hands what it answered
to the core as :class:`~kubemill.frameworks.RemoteReport` (a JSON object, or "not
known"), which judges it. Nothing here decides: an answer that is
neither (the service not answering yet, a 5xx) is no news, and the last report stands.
Each report names the pod that answered (its uid, ``source``); when the service comes back
as another pod (a retry of the whole run brings up a new head), what the last one said is
dropped at once, and the core never judges one pod's answer as another's.

The requests block (kubemill's one HTTP client, :mod:`kubemill.http_client`): the local
supervisor makes them in its loop, the operator in a thread, off its event loop.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from kubemill import http_client
from kubemill.frameworks import RemoteReport, RemoteRun
from kubemill.version import __version__

log = logging.getLogger("kubemill.remote")

TIMEOUT = (2.0, 2.0)
"""(connect, read) seconds one request may take: a service that does not answer within
them is asked again at the next turn."""

USER_AGENT = f"kubemill/{__version__}"


def ask(url: str, body: Any = None, *, authorization: str | None = None) -> tuple[int, bytes]:
    """(status, body) of a GET of ``url``, or a POST of the JSON ``body``, with
    ``authorization`` as the ``Authorization`` header if given. An HTTP error status is an
    answer too; no answer raises :class:`~kubemill.http_client.NoAnswer`."""
    method = "GET" if body is None else "POST"
    try:
        answer = http_client.request(
            method,
            url,
            body=body,
            user_agent=USER_AGENT,
            timeout=TIMEOUT,
            authorization=authorization,
        )
    except http_client.HttpAnswer as refused:
        data = refused.body if isinstance(refused.body, bytes) else b""
        return refused.status, data
    return answer.status, answer.data


class RemoteWatch:
    """A substrate's reader of one Plan's remote run: when to ask (:meth:`due`), asking
    (:meth:`ask_status`, blocking) and submitting (:meth:`submit`, blocking), with the last
    report kept (:attr:`report`).

    ``credential``: the run's :attr:`~kubemill.frameworks.RemoteRun.bearer_token` as the
    substrate reads it, asked before each request (None: not readable, or not there yet);
    every request carries it as ``Authorization: Bearer``."""

    def __init__(
        self,
        remote: RemoteRun,
        *,
        interval: float,
        credential: Callable[[], str | None] | None = None,
    ) -> None:
        self.remote = remote
        self.interval = interval
        self.credential = credential
        self.report: RemoteReport | None = None
        self._next = 0.0

    def _authorization(self) -> str | None:
        token = self.credential() if self.credential is not None else None
        return f"Bearer {token}" if token else None

    def due(self, now: float) -> bool:
        """Whether to ask now (``now``: a monotonic clock's seconds); if so, the next time
        is ``interval`` later."""
        if now < self._next:
            return False
        self._next = now + self.interval
        return True

    def ask_status(self, host: str, source: str = "") -> RemoteReport | None:
        """Ask the run's status of the service at ``host`` now, the pod ``source`` (its
        uid): the latest report (the last one when the service gave no news, unless that
        one came from another pod)."""
        if self.report is not None and self.report.source != source:
            self.report = None
        url = self.remote.url(host, self.remote.status_path)
        try:
            status, body = ask(url, authorization=self._authorization())
        except http_client.NoAnswer as exc:
            log.debug("%s: %s", url, exc)
            return self.report
        if status == 404:
            self.report = RemoteReport(found=False, source=source)
        elif status == 200:
            try:
                parsed = json.loads(body)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                self.report = RemoteReport(found=True, body=parsed, source=source)
            else:
                log.warning("%s answered what is not a JSON object", url)
        elif status in (401, 403):
            # No news either, but not for want of waiting: say so once in a while.
            log.warning("%s refused kubemill's credential (%d)", url, status)
        return self.report

    def submit(self, host: str) -> str | None:
        """POST the run to the service at ``host``; why it failed (None: it was taken). The
        next :meth:`due` is at once, so the submission is seen without a wait."""
        self._next = 0.0
        url = self.remote.url(host, self.remote.submit_path)
        try:
            status, body = ask(
                url, dict(self.remote.submit_body), authorization=self._authorization()
            )
        except http_client.NoAnswer as exc:
            return f"{url}: {exc}"
        if status >= 300:
            words = body.decode(errors="replace").strip()[:500]
            return f"{url} answered {status}: {words}"
        return None


__all__ = ["TIMEOUT", "USER_AGENT", "RemoteWatch", "ask"]
