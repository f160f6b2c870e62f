"""A followed log on its way to the page: a thread reading it through the client, the bounded
hand-over to the event loop, and the events the page gets (lines in batches, lines skipped,
the end, a failure).

A page that takes lines more slowly than the job writes them cannot be sent every line
from memory: the server would grow without bound. Waiting for it, the follower would fall
behind the log itself, and a log that is rotated (locally as on a kubelet, 50 MB a replica
by default) drops what a reader falls too far behind on, silently. So the follower waits
for the page only so long (:data:`LOG_WAIT`); past that it reads on, counting the lines the
page could not take, and the page is told how many it skipped and where to get them (the
download, which reads the log as the job keeps it). Should the follower itself fall
further behind than the log keeps, the line after the gap says how many bytes were rotated
away unread (``LogLine.rotated_away``), and the page shows that too.
"""

from __future__ import annotations

import asyncio
import json
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass

from kubemill.dashboard.views import iso
from kubemill.sdk import LogLine, SubstrateError
from kubemill.sdk.summary import short_replica_name

LOG_BATCH = 500
"""At most this many log lines in one pushed event."""
LOG_QUEUE = 2000
"""Lines a log follower may read ahead of the page before it waits."""
LOG_WAIT = 5.0
"""Seconds the follower waits for the page to take a line before it skips lines (counted):
the log itself holds them meanwhile (5 MB at 1 MB/s), far less than a rotated log keeps."""


@dataclass(frozen=True)
class Skipped:
    """Lines read but not handed to the page, which had not taken the ones before them."""

    lines: int


def line_json(job_name: str, line: LogLine) -> dict[str, str | int]:
    sent: dict[str, str | int] = {
        "replica": short_replica_name(job_name, line.replica),
        "text": line.text,
        "time": iso(line.time),
    }
    if line.rotated_away:
        # Before this line the log itself lost what the follower had not read yet (it fell
        # further behind than the log keeps): the page says so where it happened.
        sent["rotatedAway"] = line.rotated_away
    return sent


class LogFollower:
    """A thread following a job's logs through the client, handing lines to the loop.

    The client's follow blocks until the next line (or the job's end), so it cannot be
    awaited; it runs here, and stops at its next line once the page has gone. Lines pass
    through a bounded thread-safe queue, and the loop is woken only when it may be waiting
    for one: a round trip through the loop per line held a 1 MB/s log (10,000 lines a
    second) to a fraction of its lines.
    """

    END = object()

    def __init__(self, lines: Iterator[LogLine], loop: asyncio.AbstractEventLoop) -> None:
        self.lines = lines
        self.loop = loop
        self.queue: queue.Queue[object] = queue.Queue(maxsize=LOG_QUEUE)
        self.ready = asyncio.Event()
        self.stopped = threading.Event()
        self.skipped = 0
        """Lines skipped since the last that was handed over."""
        self.thread = threading.Thread(target=self._run, name="dashboard-logs", daemon=True)

    def _offer(self, item: object, patience: float | None) -> bool:
        """Hand one item to the loop, waiting while the queue is full at most ``patience``
        seconds (None: until stopped); False if it was not handed over."""
        deadline = None if patience is None else time.monotonic() + patience
        while not self.stopped.is_set():
            left = 0.5 if deadline is None else min(0.5, deadline - time.monotonic())
            try:
                self.queue.put(item, timeout=max(0.0, left))
            except queue.Full:
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                continue
            if not self.ready.is_set():
                try:
                    self.loop.call_soon_threadsafe(self.ready.set)
                except RuntimeError:  # the loop has closed: the server is shutting down
                    return False
            return True
        return False

    def _hand_over(self, line: LogLine) -> None:
        """Hand a line over, or count it skipped. Once the page has not taken a line for
        :data:`LOG_WAIT`, lines are skipped until there is room again; then the count goes
        first, so the page shows where lines are missing and how many."""
        if self.skipped and self._offer(Skipped(self.skipped), 0.0):
            self.skipped = 0
        if not self._offer(line, 0.0 if self.skipped else LOG_WAIT):
            self.skipped += 1

    async def get(self) -> object:
        """The next item, waiting for the thread to hand one over."""
        while True:
            # Clear before looking: an item put after the look sets the flag again.
            self.ready.clear()
            try:
                return self.queue.get_nowait()
            except queue.Empty:
                await self.ready.wait()

    def get_nowait(self) -> object | None:
        """The next item if one is waiting, else None."""
        try:
            return self.queue.get_nowait()
        except queue.Empty:
            return None

    def _run(self) -> None:
        try:
            for line in self.lines:
                if self.stopped.is_set():
                    return
                self._hand_over(line)
            if self.skipped and not self._offer(Skipped(self.skipped), None):
                return
            self._offer(self.END, None)
        except SubstrateError as exc:
            self._offer(exc, None)
        finally:
            close = getattr(self.lines, "close", None)
            if close is not None:
                close()


async def push_lines(
    send: Callable[[str, str], Awaitable[None]],
    ping: Callable[[], Awaitable[None]],
    follower: LogFollower,
    name: str,
    *,
    heartbeat: float,
) -> None:
    """Send the follower's lines in batches, and the lines it skipped, until the job's end
    (or a failure); ``ping`` when nothing came for ``heartbeat`` seconds."""
    while True:
        try:
            item: object | None = await asyncio.wait_for(follower.get(), heartbeat)
        except TimeoutError:
            await ping()
            continue
        batch: list[dict[str, str | int]] = []
        while isinstance(item, LogLine):
            batch.append(line_json(name, item))
            if len(batch) >= LOG_BATCH:
                item = None
                break
            item = follower.get_nowait()
        if batch:
            await send("lines", json.dumps(batch))
        if isinstance(item, Skipped):
            await send("skipped", json.dumps({"lines": item.lines}))
        elif isinstance(item, SubstrateError):
            await send("failed", json.dumps({"message": str(item)}))
            return
        elif item is LogFollower.END:
            await send("end", "{}")
            return


__all__ = ["LOG_BATCH", "LOG_QUEUE", "LOG_WAIT", "LogFollower", "Skipped", "push_lines"]
