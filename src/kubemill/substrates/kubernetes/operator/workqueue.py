"""A keyed work queue for level-triggered reconciles, as client-go's workqueue does it.

kopf feeds it: every event on a job, or on a pod or service the job owns, adds the job's
key. A key is queued at most once however many events arrive (the reconcile reads the
latest state, so one pass covers them all), and is never handed to two workers at once: an
``add`` while the key is being processed marks it dirty and it is queued again when the
worker is done. ``add_after`` is for ``requeue_after`` (deadlines, TTL); ``retry`` backs off
exponentially per key after API errors until ``forget`` resets it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    """Deduplicating FIFO of keys with delayed adds and per-key exponential backoff."""

    def __init__(self, *, base_delay: float = 0.2, max_delay: float = 60.0) -> None:
        self._queue: asyncio.Queue[K] = asyncio.Queue()
        self._queued: set[K] = set()
        self._processing: set[K] = set()
        self._dirty: set[K] = set()
        self._timers: dict[K, asyncio.TimerHandle] = {}
        self._failures: dict[K, int] = {}
        self._base_delay = base_delay
        self._max_delay = max_delay

    def __len__(self) -> int:
        return len(self._queued)

    def add(self, key: K) -> None:
        """Queue ``key`` now (no-op if already queued; deferred if being processed)."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        if key in self._processing:
            self._dirty.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def add_after(self, key: K, delay: float) -> None:
        """Queue ``key`` after ``delay`` seconds, unless something queues it sooner.

        Of two pending delayed adds of one key, the earlier wins.
        """
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        timer = self._timers.get(key)
        if timer is not None:
            if timer.when() <= when:
                return
            timer.cancel()
        self._timers[key] = loop.call_at(when, self._fire, key)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def retry(self, key: K) -> float:
        """Queue ``key`` again after its next backoff delay; returns that delay."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay = min(self._base_delay * (1 << min(failures, 30)), self._max_delay)
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """The key was processed successfully: reset its backoff."""
        self._failures.pop(key, None)

    def discard(self, key: K) -> None:
        """Drop pending delayed adds and the backoff of a key whose object is gone."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        self._failures.pop(key, None)

    async def get(self) -> K:
        """The next key to process; call :meth:`done` with it afterwards."""
        key = await self._queue.get()
        self._queued.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: K) -> None:
        """Processing of ``key`` finished; requeue it if it was added meanwhile."""
        self._processing.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    def close(self) -> None:
        """Cancel all delayed adds."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
