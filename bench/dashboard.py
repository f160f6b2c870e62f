"""How fast and how lean is ``kubemill dashboard`` on the local substrate?

Starts ``kubemill dashboard --port 0`` as a user does (a process of its own, over a state
directory of its own) and measures three things, each printed side by side with its
reference:

- **page**: the jobs page with ``--history`` (1,000) finished jobs. The history is one real
  job run to completion and recorded again under new names through the store, as
  ``bench/local_scale.py`` builds it. In Debian's chromium (Playwright, no browser
  download), per fresh page load: time to first contentful paint, to the table holding
  every row (polled each animation frame), and to the first table pushed by the live
  stream (a MutationObserver). Then the server's time per request on loopback: the jobs
  page (HTML, every row) and ``/api/jobs`` (JSON), beside ``kubemill get`` of the same
  jobs (the console script, interpreter start included), the SDK's ``list()`` in
  process, which every one of those requests calls, and the rendering of its rows, the
  two parts of each request (and of each push of the live table).
- **status**: how soon the browser shows a status change the core decided. ``--jobs``
  (100) short jobs are run (``--parallel`` at a time) with a jobs page open. The decision
  time is the ``lastTransitionTime`` of the job's ``Succeeded`` condition, and for
  ``Running`` the time of the job's ``...JobRunning`` event, which the core records with
  that condition (both in microseconds); the seen time is ``Date.now()`` in the page when
  the pushed table first holds the row in that state (a MutationObserver on the table
  body, so before the next paint). Both clocks are this machine's wall clock. A job that
  ran and ended between two pushes is never seen Running; such samples are counted, not
  timed.
- **memory**: the dashboard process's resident set size, sampled each second for
  ``--follow-seconds`` (60; the issue asks for an hour: ``--follow-seconds 3600``) while a
  client follows the logs stream of a job writing 1 MB/s (10,000 lines of 100 bytes a
  second). Prints the first, last and highest sample, the least-squares slope per minute
  after the first ``--warmup`` seconds, and how many lines reached the client.

With ``--compare SRC [SRC ...]`` the status part runs once per source tree (a ``src``
folder: the main worktree's and this one's), each in an interpreter of its own with that
tree first on its path (the dashboard it starts included), and the figures are printed side
by side, the first source as the reference.

Run on demand, never from the test suite::

    python bench/dashboard.py                      # all three
    python bench/dashboard.py --only memory --follow-seconds 3600
    python bench/dashboard.py --compare /work/main/src src   # status, before and after
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.client
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kubemill.api import ConditionType
from kubemill.dashboard import pages
from kubemill.sdk import JobClient
from kubemill.substrates.base import JobView
from local_scale import fill_history, kubemill_command, manifest
from measure import cpu_seconds, rss_mib, timed

BENCH = Path(__file__).resolve().parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
DESKTOP = {"width": 1280, "height": 800}
PARTS = ("page", "status", "memory")

TABLE_COMPLETE = """(count) => {
  if (document.querySelectorAll("#job-rows tr[data-name]").length < count) return false;
  window.__complete = window.__complete || performance.now();
  return true;
}"""
"""True once the table holds ``count`` rows; notes when (polled each animation frame)."""

FIRST_PUSH = """
document.addEventListener("DOMContentLoaded", () => {
  const rows = document.getElementById("job-rows");
  if (!rows) return;
  new MutationObserver(() => {
    window.__firstPush = window.__firstPush || performance.now();
  }).observe(rows, { childList: true });
});
"""
"""Installed before the page's own script: when the live stream first replaces the rows."""

SEEN_STATES = """
window.__seen = {};
window.__arrived = 0;
// Note when each pushed table reaches the page, before the page's own handler runs.
const listen = EventSource.prototype.addEventListener;
EventSource.prototype.addEventListener = function (type, handler, options) {
  const noted = (event) => { window.__arrived = Date.now(); return handler(event); };
  return listen.call(this, type, type === "jobs" ? noted : handler, options);
};
document.addEventListener("DOMContentLoaded", () => {
  const rows = document.getElementById("job-rows");
  const look = () => {
    const now = Date.now();
    for (const row of rows.querySelectorAll("tr[data-name]")) {
      const key = row.dataset.name + " " + row.dataset.state;
      if (!(key in window.__seen)) window.__seen[key] = [window.__arrived, now];
    }
  };
  look();
  new MutationObserver(look).observe(rows, { childList: true });
});
"""
"""Records, per (job, state), the wall-clock times the pushed table holding that row state
reached the page and the page held it (after the page's handler swapped the rows in)."""

WRITER = """
import sys, time
seconds = float(sys.argv[1])
block = ("x" * 95 + " {:>3}\\n").format  # 100 bytes a line
start = time.time()
tick = 0
while time.time() - start < seconds:
    sys.stdout.write("".join(block(i % 1000) for i in range(1000)))  # 100 kB
    sys.stdout.flush()
    tick += 1
    delay = start + tick / 10 - time.time()  # ten blocks a second: 1 MB/s
    if delay > 0:
        time.sleep(delay)
print("writer done", flush=True)
"""


# --- the dashboard process -------------------------------------------------------------------


@dataclass
class Dashboard:
    url: str
    pid: int


@contextlib.contextmanager
def dashboard(state: Path) -> Iterator[Dashboard]:
    """``kubemill dashboard --port 0`` over ``state``; stopped with Ctrl-C (SIGINT)."""
    command = [sys.executable, "-c", "from kubemill.cli import main; main()"]
    process = subprocess.Popen(
        [*command, "--state-dir", str(state), "dashboard", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+/", line)
        if not found:
            raise SystemExit(f"the dashboard did not announce its URL: {line!r}")
        yield Dashboard(found.group(0), process.pid)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


def get(url: str, path: str) -> bytes:
    """One GET on a new connection (as a browser's first request of a page)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        body = response.read()
        if response.status != 200:
            raise SystemExit(f"GET {path}: {response.status} {body[:200]!r}")
        return body
    finally:
        connection.close()


def summary(samples: list[float], scale: float = 1000.0) -> str:
    """Median (min-max), in milliseconds by default."""
    if not samples:
        return "-"
    return (
        f"{statistics.median(samples) * scale:.0f}"
        f" ({min(samples) * scale:.0f}-{max(samples) * scale:.0f})"
    )


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


# --- part a: the jobs page with a long history -----------------------------------------------


@dataclass
class PageFigures:
    paint: list[float] = field(default_factory=list)
    complete: list[float] = field(default_factory=list)
    first_push: list[float] = field(default_factory=list)
    page_requests: list[float] = field(default_factory=list)
    json_requests: list[float] = field(default_factory=list)
    gets: list[float] = field(default_factory=list)
    sdk_lists: list[float] = field(default_factory=list)
    renders: list[float] = field(default_factory=list)
    page_bytes: int = 0
    json_bytes: int = 0


def measure_page(state: Path, history: int, runs: int) -> PageFigures:
    figures = PageFigures()
    client = JobClient(state_dir=state)
    count = len(client.list())
    with dashboard(state) as served, browser() as chromium:
        get(served.url, "/")  # one warm-up request, not counted
        for _ in range(runs):
            page = chromium.new_page(viewport=DESKTOP)
            page.add_init_script(FIRST_PUSH)
            page.goto(served.url, wait_until="commit")
            page.wait_for_function(TABLE_COMPLETE, arg=count, polling="raf", timeout=120_000)
            page.wait_for_function("() => window.__firstPush !== undefined", timeout=120_000)
            timings = page.evaluate(
                """() => ({
                  paint: performance.getEntriesByName("first-contentful-paint")[0]?.startTime,
                  complete: window.__complete,
                  push: window.__firstPush,
                })"""
            )
            page.close()
            figures.paint.append(timings["paint"] / 1000)
            figures.complete.append(timings["complete"] / 1000)
            figures.first_push.append(timings["push"] / 1000)
        for _ in range(runs):
            figures.page_requests.append(timed(lambda: get(served.url, "/")))
            figures.json_requests.append(timed(lambda: get(served.url, "/api/jobs")))
        figures.page_bytes = len(get(served.url, "/"))
        figures.json_bytes = len(get(served.url, "/api/jobs"))
    env = {**os.environ, "KUBEMILL_STATE_DIR": str(state)}
    command = [*kubemill_command(), "get"]
    for _ in range(runs):
        figures.gets.append(
            timed(lambda: subprocess.run(command, env=env, check=True, capture_output=True))
        )
        figures.sdk_lists.append(timed(client.list))
        figures.renders.append(timed(functools.partial(pages.jobs_rows, client.list())))
    print(f"page: {count} jobs listed ({history} asked)", file=sys.stderr)
    return figures


def print_page(figures: PageFigures, history: int, runs: int) -> None:
    print(f"\n[page] jobs page with {history} jobs in history; median (min-max) ms of {runs}")
    print("in chromium, from navigation start:")
    print(f"  first contentful paint        {summary(figures.paint)}")
    print(f"  table complete (every row)    {summary(figures.complete)}")
    print(f"  first live push of the table  {summary(figures.first_push)}")
    page = statistics.median(figures.page_requests)
    rows = [
        (f"GET / (HTML, {figures.page_bytes // 1024} KiB)", figures.page_requests),
        (f"GET /api/jobs (JSON, {figures.json_bytes // 1024} KiB)", figures.json_requests),
        ("kubemill get (console script)", figures.gets),
        ("JobClient.list() in process", figures.sdk_lists),
        ("pages.jobs_rows() of that list", figures.renders),
    ]
    print("per request on loopback, and the references:")
    for label, samples in rows:
        ratio = statistics.median(samples) / page
        print(f"  {label:<34} {summary(samples):<18} x{ratio:.2f} of GET /")


# --- part b: a status change, decided by the core, seen in the browser ------------------------


@dataclass
class StatusFigures:
    delays: dict[str, list[float]] = field(default_factory=dict)
    """Decision to the page holding the row in its new state, per change."""
    arrivals: dict[str, list[float]] = field(default_factory=dict)
    """Decision to the pushed table reaching the page."""
    handling: list[float] = field(default_factory=list)
    """The page's handler: from a pushed table's arrival to its rows swapped in."""
    unseen: dict[str, int] = field(default_factory=dict)
    not_succeeded: dict[str, str] = field(default_factory=dict)
    """Jobs that had not succeeded when waited for (name -> phase, reason, message): not
    timed (a Succeeded time they have not got)."""
    jobs: int = 0
    listed: int = 0


def measure_status(state: Path, jobs: int, parallel: int, work: Path) -> StatusFigures:
    client = JobClient(state_dir=state)
    figures = StatusFigures(jobs=jobs, listed=len(client.list()) + jobs)
    program = [sys.executable, "-c", "import time; time.sleep(1.2)"]
    names = [f"status-{index}" for index in range(jobs)]
    with dashboard(state) as served, browser() as chromium:
        page = chromium.new_page(viewport=DESKTOP)
        page.add_init_script(SEEN_STATES)
        page.goto(served.url)
        page.wait_for_function("() => window.__seen !== undefined")
        page.wait_for_timeout(1500)  # the stream is open and has pushed its first table
        for start in range(0, jobs, parallel):
            batch = names[start : start + parallel]
            for name in batch:
                client.submit(manifest(name, program), detach=True, base_dir=str(work))
            for name in batch:
                # wait() returns the job as it is at its timeout, and a failed job as it
                # returns a succeeded one: look at which it is.
                ended = client.wait(name, timeout=120)
                if ended.phase != "Succeeded":
                    figures.not_succeeded[name] = outcome(ended)
        page.wait_for_timeout(2000)  # the last change has been pushed
        seen: dict[str, tuple[float, float]] = page.evaluate("window.__seen")
    for name in names:
        for change, decided in decisions(client, name).items():
            shown = seen.get(f"{name} {change}")
            if shown is None:
                figures.unseen[change] = figures.unseen.get(change, 0) + 1
                continue
            arrived, held = shown[0] / 1000, shown[1] / 1000
            figures.delays.setdefault(change, []).append(held - decided.timestamp())
            figures.arrivals.setdefault(change, []).append(arrived - decided.timestamp())
            figures.handling.append(held - arrived)
    return figures


def decisions(client: JobClient, name: str) -> dict[str, datetime]:
    """When the core decided the job was Running, and Succeeded: the time of the event it
    recorded with each condition. (The Running condition's own lastTransitionTime moves
    again when it turns False at the end, so it cannot say when the job began to run.)"""
    found: dict[str, datetime] = {}
    for event in client.events(name):
        for state in ("Running", "Succeeded"):
            if event.reason.endswith(f"Job{state}"):
                found.setdefault(state, event.time)
    # A job that did not succeed (it failed, or still ran when the wait gave up) has no
    # Succeeded condition (True) to time.
    status = client.get(name).status
    succeeded = status.condition(ConditionType.SUCCEEDED)
    if succeeded is not None and succeeded.status == "True" and succeeded.last_transition_time:
        found["Succeeded"] = succeeded.last_transition_time
    return found


def outcome(view: JobView) -> str:
    """A job's phase and why, from its last condition (for a job that did not succeed)."""
    conditions = view.status.conditions
    last = conditions[-1] if conditions else None
    why = f": {last.reason}: {last.message}" if last is not None else ""
    return f"{view.phase}{'' if view.finished else ' (not finished)'}{why}"


def print_status(figures: StatusFigures, poll: float) -> None:
    print(
        f"\n[status] {figures.jobs} jobs (with {figures.listed} in the list): from the core's"
        " decision (its condition or event time) to the row in that state in the page,"
        " and to the pushed table's arrival in the page"
    )
    print(
        f"  {'change':<10} {'seen':>5} {'unseen':>6}  {'median':>8} {'p90':>8} {'max':>8}"
        f"  {'arrived: median':>16} {'p90':>8}"
    )
    everything: list[float] = []
    for change in ("Running", "Succeeded"):
        samples = figures.delays.get(change, [])
        arrivals = figures.arrivals.get(change, [])
        everything += samples
        unseen = figures.unseen.get(change, 0)
        if not samples:
            print(f"  {change:<10} {0:>5} {unseen:>6}")
            continue
        print(
            f"  {change:<10} {len(samples):>5} {unseen:>6}  {statistics.median(samples):>7.3f}s"
            f" {percentile(samples, 0.9):>7.3f}s {max(samples):>7.3f}s"
            f"  {statistics.median(arrivals):>15.3f}s {percentile(arrivals, 0.9):>7.3f}s"
        )
    for name, why in figures.not_succeeded.items():
        print(f"  not succeeded, not timed: {name} {why}")
    if everything:
        met = statistics.median(everything) <= 0.5
        print(
            f"  all: median {statistics.median(everything):.3f}s, goal <= 0.5 s"
            f" {'met' if met else 'missed'} (the server lists the jobs at most {poll} s apart);"
            f" the page's handler (arrival to rows swapped in): median"
            f" {statistics.median(figures.handling) * 1000:.0f} ms"
        )


def compare_status(sources: list[str], args: argparse.Namespace) -> None:
    """The status part of each source tree, each in an interpreter of its own, side by side."""
    results: list[tuple[str, StatusFigures]] = []
    for source in sources:
        path = os.pathsep.join([str(Path(source).resolve()), str(BENCH)])
        argv = [sys.executable, str(BENCH / "dashboard.py"), "--only", "status", "--json"]
        argv += ["--jobs", str(args.jobs), "--parallel", str(args.parallel)]
        argv += ["--history", str(args.history)]
        print(f"status part of {source}", file=sys.stderr)
        out = subprocess.run(
            argv, env={**os.environ, "PYTHONPATH": path}, check=True, stdout=subprocess.PIPE
        ).stdout.decode()
        results.append((source, StatusFigures(**json.loads(out.splitlines()[-1]))))
    first = results[0][1]
    print(
        f"\n[status] {first.jobs} jobs (with {first.listed} in the list): seconds from the"
        " core's decision to the row in that state in the page, median (p90), per source;"
        " the ratio of medians to the first source"
    )
    print(f"  {'change':<10}" + "".join(f" {source:<30}" for source, _ in results))

    def samples(figures: StatusFigures, change: str) -> list[float]:
        if change == "all":
            return [d for delays in figures.delays.values() for d in delays]
        return figures.delays.get(change, [])

    for change in ("Running", "Succeeded", "all"):
        cells = []
        reference = samples(first, change)
        for _, figures in results:
            got = samples(figures, change)
            if not got:
                cells.append(f" {'-':<30}")
                continue
            cell = f"{statistics.median(got):.3f} ({percentile(got, 0.9):.3f})"
            if reference:
                cell += f" x{statistics.median(got) / statistics.median(reference):.2f}"
            cells.append(f" {cell:<30}")
        print(f"  {change:<10}" + "".join(cells))
    unseen = ", ".join(f"{source}: {sum(f.unseen.values())}" for source, f in results)
    print(f"  unseen (ran and ended between two pushes, not timed): {unseen}")
    for source, figures in results:
        for name, why in figures.not_succeeded.items():
            print(f"  {source}: not succeeded, not timed: {name} {why}")


# --- part c: memory while following a fast log ----------------------------------------------


@dataclass
class MemoryFigures:
    seconds: list[float] = field(default_factory=list)
    rss_mib: list[float] = field(default_factory=list)
    lines: int = 0
    skipped: int = 0
    written_seconds: float = 0.0
    cpu_seconds: float = 0.0
    """CPU time (user and system) the dashboard process used while followed."""


class Follower(threading.Thread):
    """Reads a logs stream as a browser's EventSource does, counting the lines."""

    def __init__(self, url: str, path: str) -> None:
        super().__init__(daemon=True, name="follower")
        parts = urlsplit(url)
        self.connection = http.client.HTTPConnection(parts.hostname or "", parts.port)
        self.path = path
        self.lines = 0
        self.skipped = 0
        """Lines the server said it skipped (the client had not taken them in time)."""
        self.ended = False

    def run(self) -> None:
        # stop() closes the connection under this thread's read: whatever that raises
        # (OSError, or AttributeError from http.client's closed reader) ends the thread.
        with contextlib.suppress(Exception):
            self.connection.request("GET", self.path)
            response = self.connection.getresponse()
            event = ""
            for raw in response:
                if raw.startswith(b"event: "):
                    event = raw[7:].strip().decode()
                elif raw.startswith(b"data: ") and event == "lines":
                    self.lines += len(json.loads(raw[6:]))
                elif raw.startswith(b"data: ") and event == "skipped":
                    self.skipped += json.loads(raw[6:])["lines"]
                elif raw.startswith(b"data: ") and event == "end":
                    self.ended = True
                    return

    def stop(self) -> None:
        if self.connection.sock is not None:
            with contextlib.suppress(OSError):
                self.connection.sock.shutdown(socket.SHUT_RDWR)
        self.join(timeout=10)
        self.connection.close()


def measure_memory(state: Path, follow_seconds: float, work: Path) -> MemoryFigures:
    client = JobClient(state_dir=state)
    figures = MemoryFigures(written_seconds=follow_seconds)
    name = "writer"
    argv = [sys.executable, "-c", WRITER, str(follow_seconds + 5)]
    with dashboard(state) as served:
        client.submit(manifest(name, argv), detach=True, base_dir=str(work))
        follower = Follower(served.url, f"/api/jobs/default/{name}/logs/stream?replica=master-0")
        follower.start()
        start = time.monotonic()
        cpu_before = cpu_seconds(served.pid)
        try:
            while (elapsed := time.monotonic() - start) <= follow_seconds:
                figures.seconds.append(elapsed)
                figures.rss_mib.append(rss_mib(served.pid))
                time.sleep(1.0 - (time.monotonic() - start) % 1.0)
            figures.lines, figures.skipped = follower.lines, follower.skipped
            figures.cpu_seconds = cpu_seconds(served.pid) - cpu_before
        finally:
            follower.stop()
            client.delete(name)
    return figures


def slope_per_minute(seconds: list[float], values: list[float]) -> float:
    """Least-squares slope of ``values`` over ``seconds``, per minute."""
    if len(seconds) < 2:
        return float("nan")
    mean_x, mean_y = statistics.fmean(seconds), statistics.fmean(values)
    num = sum((x - mean_x) * (y - mean_y) for x, y in zip(seconds, values, strict=True))
    den = sum((x - mean_x) ** 2 for x in seconds)
    return num / den * 60


def print_memory(figures: MemoryFigures, warmup: float) -> None:
    kept = [(s, r) for s, r in zip(figures.seconds, figures.rss_mib, strict=True) if s >= warmup]
    slope = slope_per_minute([s for s, _ in kept], [r for _, r in kept])
    written = int(figures.written_seconds * 10_000)
    print(
        f"\n[memory] dashboard RSS while a client follows a 1 MB/s log for"
        f" {figures.written_seconds:.0f} s ({len(figures.rss_mib)} samples, one a second)"
    )
    print(
        f"  first {figures.rss_mib[0]:.1f} MiB, last {figures.rss_mib[-1]:.1f} MiB,"
        f" highest {max(figures.rss_mib):.1f} MiB"
    )
    print(f"  slope after {warmup:.0f} s: {slope:+.2f} MiB/min (least squares)")
    # The curve's shape, in ten steps: a leak climbs steadily, a warm-up levels off.
    step = max(1, len(figures.rss_mib) // 10)
    shape = ", ".join(
        f"{figures.seconds[i]:.0f}s {figures.rss_mib[i]:.1f}"
        for i in range(0, len(figures.rss_mib), step)
    )
    print(f"  RSS (MiB) along the run: {shape}")
    print(
        f"  lines reaching the client: {figures.lines} of about {written} written"
        f" ({figures.lines / max(written, 1):.0%}), {figures.skipped} skipped with a marker"
        f" (the client did not take them in time), the rest not read yet or lost; the"
        f" dashboard using {figures.cpu_seconds / figures.written_seconds:.0%} of a core"
    )


# --- main -----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=PARTS, nargs="+", default=list(PARTS))
    parser.add_argument("--history", type=int, default=1000, help="finished jobs in history")
    parser.add_argument("--runs", type=int, default=5, help="page loads and requests")
    parser.add_argument("--jobs", type=int, default=100, help="jobs of the status part")
    parser.add_argument("--parallel", type=int, default=1, help="status jobs at a time")
    parser.add_argument("--follow-seconds", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds left out of the slope")
    parser.add_argument("--compare", nargs="+", metavar="SRC", help="source trees side by side")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.compare:
        compare_status(args.compare, args)
        return
    # Started in the background (`... &`), a shell hands this process SIGINT ignored, and
    # each child would inherit that: the dashboard is stopped with Ctrl-C, as a user does.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from kubemill.dashboard.server import POLL_SECONDS

    work = Path(tempfile.mkdtemp(prefix="kubemill-dashboard-bench-"))
    os.environ.setdefault("KUBEMILL_CONFIG", str(work / "no-config.yaml"))
    results: list[Callable[[], None]] = []
    try:
        if "page" in args.only or "status" in args.only:
            state = work / "history"
            fill_history(state, args.history)
            print(f"seeded {args.history} finished jobs", file=sys.stderr)
            if "page" in args.only:
                page = measure_page(state, args.history, args.runs)
                results.append(lambda: print_page(page, args.history, args.runs))
            if "status" in args.only:
                status = measure_status(state, args.jobs, args.parallel, work)
                if args.json:  # a child of --compare: the figures as one JSON line
                    results.append(lambda: print(json.dumps(asdict(status))))
                else:
                    results.append(lambda: print_status(status, POLL_SECONDS))
        if "memory" in args.only:
            memory = measure_memory(work / "memory", args.follow_seconds, work)
            results.append(lambda: print_memory(memory, args.warmup))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for show in results:
        show()


if __name__ == "__main__":
    main()
