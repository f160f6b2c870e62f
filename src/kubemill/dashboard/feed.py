"""The jobs feed of the dashboard: one loop listing the jobs while any jobs page is open,
pushing to each only the rows that changed since what it was last sent.

It keeps the rows it last sent (shared by every open jobs page); a page that opens gets
the whole table first, then rows added, changed or removed, merged while the page has not
taken them (so a slow page skips states, never a change).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

from kubemill.dashboard import pages
from kubemill.dashboard.views import job_key
from kubemill.substrates.base import JobView

logger = logging.getLogger(__name__)

LISTING_SHARE = 10
"""The feed waits at least this many times as long as its last listing took before it lists
again (but no longer than its ``poll_seconds``): listing takes at most a tenth of its
time, whatever the substrate, and a listing that costs little is repeated often, so that a
change shows sooner. The local store's costs about 2 ms for 1,100 jobs when none changed
(it reads no row then) and about 30 ms when one did (it decodes only rows that changed);
a cluster's is a round trip per kind."""
QUICKEST_POLL = 0.1
"""The feed never lists more often than this (seconds)."""


class _Pending:
    """What one open jobs page has yet to be sent: the rows changed or added since its last
    message (by key, the newest of each), the rows removed, the filters' options, and the
    error of the last listing, if it failed. Changes merge until the page takes them, so a
    slow page skips intermediate states but never a change."""

    def __init__(self, *, full: bool) -> None:
        self.full = full
        """The page's table is to be rebuilt from ``rows`` (its first message)."""
        self.rows: dict[str, pages.RenderedRow] = {}
        self.removed: set[str] = set()
        self.options: dict[str, list[str]] | None = None
        self.error: str | None = None

    def merge(
        self,
        changed: Iterable[pages.RenderedRow],
        removed: Iterable[str],
        options: dict[str, list[str]] | None,
        error: str | None,
    ) -> None:
        for row in changed:
            self.rows[row.key] = row
            self.removed.discard(row.key)
        for key in removed:
            self.rows.pop(key, None)
            if not self.full:
                self.removed.add(key)
        if options is not None:
            self.options = options
        self.error = error

    def payload(self) -> str:
        rows = sorted(self.rows.values(), key=lambda row: row.order, reverse=True)
        message: dict[str, Any] = {
            "full": self.full,
            "rows": [{"key": r.key, "order": r.order, "html": r.html} for r in rows],
            "removed": sorted(self.removed),
        }
        if self.options is not None:
            message["options"] = self.options
        if self.error is not None:
            message["error"] = self.error
        return json.dumps(message)


class _Subscriber:
    """One open jobs page: its pending message and a flag set when there is one."""

    def __init__(self) -> None:
        self.pending: _Pending | None = None
        self.ready = asyncio.Event()

    def take(self) -> str:
        pending = self.pending
        assert pending is not None
        self.pending = None
        self.ready.clear()
        return pending.payload()


class JobsFeed:
    """One loop listing the jobs while any jobs page is open. It keeps the rows it last
    sent (shared by every open jobs page) and pushes only the rows that changed, were added
    or were removed; a page that opens gets the whole table first.

    Each poll renders only the rows of jobs whose view is new: the client hands back the
    same view object for a job whose records did not change (the local substrate does), and
    a row is a function of its view; a listing of the very views of the last one changes
    nothing and is not looked at further. The next poll comes as soon as the listing's cost
    allows (:data:`LISTING_SHARE`), within ``poll_seconds``.
    """

    def __init__(
        self, list_jobs: Callable[[], Awaitable[list[JobView]]], *, poll_seconds: float
    ) -> None:
        self.list_jobs = list_jobs
        """Lists every job (the SDK's ``list``, run off the event loop)."""
        self.poll_seconds = poll_seconds
        self.subscribers: set[_Subscriber] = set()
        self.rows: dict[str, pages.RenderedRow] | None = None
        """The rows last sent, by key; None before the first listing."""
        self.options: dict[str, list[str]] = {}
        self.error: str | None = None
        self.rendered: dict[str, tuple[JobView, pages.RenderedRow]] = {}
        self.views: list[JobView] = []
        """The views of the last listing that was looked at."""
        self.task: asyncio.Task[None] | None = None

    @contextlib.asynccontextmanager
    async def subscribe(self) -> AsyncIterator[_Subscriber]:
        subscriber = _Subscriber()
        # Its first message is the whole table: the rows last listed, or if there are none
        # yet, those of the next listing (every row is new to it).
        subscriber.pending = _Pending(full=True)
        if self.rows is not None:
            self._offer(subscriber, self.rows.values(), (), self.options, self.error)
        self.subscribers.add(subscriber)
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._run())
        try:
            yield subscriber
        finally:
            self.subscribers.discard(subscriber)

    @staticmethod
    def _offer(
        subscriber: _Subscriber,
        changed: Iterable[pages.RenderedRow],
        removed: Iterable[str],
        options: dict[str, list[str]] | None,
        error: str | None,
    ) -> None:
        if subscriber.pending is None:
            subscriber.pending = _Pending(full=False)
        subscriber.pending.merge(changed, removed, options, error)
        subscriber.ready.set()

    def _render(self, views: list[JobView]) -> dict[str, pages.RenderedRow]:
        """Every job's row, rendering only those whose view is not the one last rendered."""
        rendered: dict[str, tuple[JobView, pages.RenderedRow]] = {}
        for view in views:
            key = job_key(view)
            known = self.rendered.get(key)
            row = known[1] if known is not None and known[0] is view else pages.rendered_row(view)
            rendered[key] = (view, row)
        self.rendered = rendered
        return {key: row for key, (_, row) in rendered.items()}

    async def _run(self) -> None:
        while self.subscribers:
            started = time.monotonic()
            try:
                views = await self.list_jobs()
                took = time.monotonic() - started
                if self.rows is None or self.error is not None or not self._same(views):
                    rows = self._render(views)
                    options = pages.filter_options(views)
                    self._publish(rows, options, None)
                    self.views = views
            except Exception as exc:
                # The pages say what went wrong (a cluster unreachable, a state directory
                # gone) and the loop keeps trying: it must outlive a passing failure.
                logger.warning("listing the jobs failed: %s", exc)
                took = time.monotonic() - started
                error = f"cannot list the jobs: {exc}"
                self._publish(self.rows or {}, self.options, error)
            pause = max(QUICKEST_POLL, LISTING_SHARE * took)
            await asyncio.sleep(min(self.poll_seconds, pause))
        self.rows, self.options, self.error = None, {}, None
        self.rendered, self.views = {}, []

    def _same(self, views: list[JobView]) -> bool:
        """Whether ``views`` are the very views last looked at, in the same order (then
        no row, filter option or count can have changed)."""
        last = self.views
        return len(views) == len(last) and all(a is b for a, b in zip(views, last, strict=True))

    def _publish(
        self, rows: dict[str, pages.RenderedRow], options: dict[str, list[str]], error: str | None
    ) -> None:
        """Offer each open page what changed since the last listing (a page that has had
        nothing yet gets every row, as the first message of its table)."""
        last = self.rows or {}
        changed = [row for key, row in rows.items() if last.get(key) != row]
        removed = [key for key in last if key not in rows]
        new_options = options if options != self.options else None
        first = self.rows is None
        if first or changed or removed or new_options is not None or error != self.error:
            for subscriber in self.subscribers:
                self._offer(subscriber, changed, removed, new_options, error)
        self.rows, self.options, self.error = rows, options, error

    async def stop(self) -> None:
        self.subscribers.clear()
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
