"""A followed log on its way to the page (``dashboard/log_follow.py``): a page that keeps
taking lines gets every one of them, in order; a page that stops taking them makes the
follower read on and count what it skipped, and the page is told how many, at the place
they are missing, before the lines that follow. No time is measured: the page's slowness
is a page that does not read until the follower has skipped what the test expects."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from dashboard_support import eventually_async

from kubemill.dashboard import log_follow
from kubemill.dashboard.log_follow import LogFollower, push_lines
from kubemill.sdk import LogLine

pytestmark = pytest.mark.asyncio


def line(index: int) -> LogLine:
    return LogLine(replica="job-master-0", text=f"line {index}")


class Page:
    """What the page is sent: the events in order, their data decoded."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    async def send(self, event: str, data: str) -> None:
        self.events.append((event, json.loads(data)))

    async def ping(self) -> None:
        self.events.append(("ping", None))

    def texts(self) -> list[str]:
        """The lines shown, with ``[N skipped]`` where the page was told lines are missing."""
        shown: list[str] = []
        for event, data in self.events:
            if event == "lines":
                shown += [line["text"] for line in data]
            elif event == "skipped":
                shown.append(f"[{data['lines']} skipped]")
        return shown


async def follow(page: Page, follower: LogFollower) -> None:
    await push_lines(page.send, page.ping, follower, "job", heartbeat=60.0)


async def test_a_page_that_keeps_up_gets_every_line_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(log_follow, "LOG_QUEUE", 50)  # many times around the queue
    count = 5000
    follower = LogFollower(iter([line(i) for i in range(count)]), asyncio.get_running_loop())
    follower.thread.start()
    page = Page()
    await follow(page, follower)
    assert page.texts() == [f"line {i}" for i in range(count)]
    assert page.events[-1] == ("end", {})
    assert all(len(data) <= log_follow.LOG_BATCH for event, data in page.events if data)


async def test_a_page_that_stops_taking_lines_is_told_how_many_were_skipped_and_where(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(log_follow, "LOG_QUEUE", 10)
    monkeypatch.setattr(log_follow, "LOG_WAIT", 0.05)
    caught_up = threading.Event()

    def written() -> Iterator[LogLine]:
        yield from (line(i) for i in range(100))
        caught_up.wait()  # the job writes more once the page has taken what it could
        yield from (line(i) for i in range(100, 105))

    follower = LogFollower(written(), asyncio.get_running_loop())
    follower.thread.start()
    # The page takes nothing: the follower fills the queue (10 lines), waits for the page,
    # then reads on, counting the 90 lines it could not hand over.
    await eventually_async(lambda: follower.skipped == 90, what="90 lines skipped")
    page = Page()
    reading = asyncio.create_task(follow(page, follower))
    await eventually_async(lambda: len(page.texts()) >= 10, what="the queued lines sent")
    caught_up.set()
    await reading
    assert page.texts() == [
        *(f"line {i}" for i in range(10)),
        "[90 skipped]",
        *(f"line {i}" for i in range(100, 105)),
    ]
    assert page.events[-1] == ("end", {})


async def test_lines_skipped_at_the_end_of_the_log_are_counted_before_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(log_follow, "LOG_QUEUE", 5)
    monkeypatch.setattr(log_follow, "LOG_WAIT", 0.05)
    follower = LogFollower(iter([line(i) for i in range(30)]), asyncio.get_running_loop())
    follower.thread.start()
    await eventually_async(lambda: follower.skipped == 25, what="25 lines skipped")
    page = Page()
    await follow(page, follower)
    assert page.texts() == [*(f"line {i}" for i in range(5)), "[25 skipped]"]
    assert page.events[-1] == ("end", {})


async def test_bytes_the_log_lost_before_the_follower_read_them_reach_the_page() -> None:
    lines = [line(0), LogLine("job-master-0", "line 5", rotated_away=4096), line(6)]
    follower = LogFollower(iter(lines), asyncio.get_running_loop())
    follower.thread.start()
    page = Page()
    await follow(page, follower)
    sent = [item for event, data in page.events if event == "lines" for item in data]
    assert [item["text"] for item in sent] == ["line 0", "line 5", "line 6"]
    assert [item.get("rotatedAway") for item in sent] == [None, 4096, None]
