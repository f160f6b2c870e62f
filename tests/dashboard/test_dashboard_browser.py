"""The dashboard in a real browser: Debian's chromium driven by Playwright, against
``kubemill dashboard`` started as a user starts it, over a live local substrate running
real jobs.

Each page is also photographed (1280x800 and a phone's 390x844) under the test's temporary
folder (``screenshots/``) and each picture is checked to hold more than a blank page.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from dashboard_support import BURNER, SLEEPER, cleanup, page_of, pytorch_manifest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from kubemill.sdk import JobClient
from support.waiting import eventually

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 60_000
"""How long an expectation may take (a safety net on a loaded machine, not a bound)."""
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}

TALKER = (
    "import time\n"
    "for i in range(8):\n"
    "    print(f'step {i} loss {1 / (i + 1):.3f}', flush=True)\n"
    "    time.sleep(0.4)\n"
)
FAILING = "import sys; print('bad input', file=sys.stderr, flush=True); sys.exit(3)"


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KUBEMILL_CONFIG", str(tmp_path / "no-config.yaml"))
    monkeypatch.setenv("KUBEMILL_STATE_DIR", str(tmp_path / "env-state"))
    return tmp_path / "state"


@pytest.fixture
def jobs(state: Path) -> Iterator[JobClient]:
    client = JobClient("local", state_dir=state)
    yield client
    cleanup(client)


@pytest.fixture
def dashboard(state: Path) -> Iterator[str]:
    """``kubemill dashboard --port 0`` as a process of its own; yields its URL."""
    # Ctrl-C as at a terminal: a launcher may hand the test an ignored SIGINT (every job a
    # non-interactive shell starts in the background inherits one), which Python keeps.
    start = (
        "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from kubemill.cli import main; main()"
    )
    command = [sys.executable, "-c", start]
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
        assert found, f"the dashboard did not announce its URL: {line!r}"
        yield found.group(0)
    finally:
        # Ctrl-C, as a user stops it: open streams are closed and the process ends.
        process.send_signal(signal.SIGINT)
        try:
            code = process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise AssertionError("the dashboard did not stop on SIGINT") from None
        assert code == 0, process.stdout.read() if process.stdout else code


@pytest.fixture
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = tmp_path / "screenshots"
    folder.mkdir()
    return folder


COUNT_COLOURS = """async (url) => {
  const image = new Image();
  image.src = url;
  await image.decode();
  const canvas = document.createElement("canvas");
  canvas.width = image.width;
  canvas.height = image.height;
  const context = canvas.getContext("2d");
  context.drawImage(image, 0, 0);
  const data = context.getImageData(0, 0, image.width, image.height).data;
  const seen = new Set();
  for (let i = 0; i < data.length; i += 4) {
    seen.add((data[i] << 16) | (data[i + 1] << 8) | data[i + 2]);
  }
  return seen.size;
}"""
"""Decodes a PNG in a blank page of the browser and counts its distinct colours."""


def open_job_page(page: Page, dashboard: str, name: str, suffix: str = "") -> None:
    """Open the page of the PyTorchJob ``name`` (``suffix``: a page below it, such as
    ``/logs?replica=master-0``) by the path the dashboard's own links give it."""
    page.goto(dashboard.rstrip("/") + page_of(name, suffix))


def distinct_colours(browser: Browser, png: bytes) -> int:
    scratch = browser.new_page()
    try:
        url = "data:image/png;base64," + base64.b64encode(png).decode()
        return int(scratch.evaluate(COUNT_COLOURS, url))
    finally:
        scratch.close()


def photograph(page: Page, folder: Path, name: str) -> Path:
    """A full-page picture of ``page``, checked to show more than a blank page."""
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert page.context.browser is not None
    colours = distinct_colours(page.context.browser, path.read_bytes())
    # A blank page is one colour; text on it is dozens (anti-aliasing), badges more.
    assert colours > 20, f"{path} looks blank ({colours} colours)"
    return path


def test_a_job_goes_running_then_succeeded_and_its_logs_follow_without_a_reload(
    dashboard: str, browser: Browser, jobs: JobClient, shots: Path
) -> None:
    page = browser.new_page(viewport=DESKTOP)
    page.goto(dashboard)
    expect(page.get_by_role("heading", name="Jobs")).to_be_visible()
    page.evaluate("window.notReloaded = true")

    jobs.submit(pytorch_manifest("ddp", TALKER, workers=1))
    row = page.locator('tr[data-name="ddp"]')
    expect(row).to_have_attribute("data-state", "Running", timeout=WAIT_MS)
    expect(row.locator("td").nth(5)).to_have_text("2/2", timeout=WAIT_MS)
    photograph(page, shots, "jobs-running")
    expect(row).to_have_attribute("data-state", "Succeeded", timeout=WAIT_MS)
    assert page.evaluate("window.notReloaded") is True, "the jobs page was reloaded"
    photograph(page, shots, "jobs-desktop")
    page.set_viewport_size(PHONE)
    photograph(page, shots, "jobs-phone")

    # A second run, followed from its logs page while it writes.
    jobs.submit(pytorch_manifest("follow", TALKER))
    logs = browser.new_page(viewport=DESKTOP)
    open_job_page(logs, dashboard, "follow", "/logs?replica=master-0")
    log = logs.locator("#log")
    expect(log).to_contain_text("step 0", timeout=WAIT_MS)
    assert not jobs.get("follow").finished, "the first line should come while the job runs"
    logs.evaluate("window.notReloaded = true")
    expect(logs.locator("#log-state")).to_contain_text("has ended", timeout=WAIT_MS)
    assert log.inner_text().splitlines() == [f"step {i} loss {1 / (i + 1):.3f}" for i in range(8)]
    assert logs.evaluate("window.notReloaded") is True
    photograph(logs, shots, "logs")
    logs.locator("#log-search").fill("step 7")
    expect(log.locator("div:visible")).to_have_count(1)
    expect(logs.locator("#log-count")).to_have_text("1 of 8 lines match")
    assert logs.get_by_role("link", name="Download").get_attribute("href") == (
        page_of("follow", "/logs.txt?replica=master-0")
    )

    job = browser.new_page(viewport=DESKTOP)
    open_job_page(job, dashboard, "ddp")
    expect(job.locator('[data-section="summary"] .state')).to_have_text("Succeeded")
    expect(job.locator('tr[data-replica="worker-0"] .exit')).to_have_text("0")
    photograph(job, shots, "job-succeeded")


def test_a_failed_job_shows_the_failing_replicas_exit_code_and_reason(
    dashboard: str, browser: Browser, jobs: JobClient, shots: Path
) -> None:
    page = browser.new_page(viewport=DESKTOP)
    jobs.submit(pytorch_manifest("broken", FAILING, workers=1, worker_code=SLEEPER))
    open_job_page(page, dashboard, "broken")
    master = page.locator('tr[data-replica="master-0"]')
    expect(master.locator(".exit")).to_have_text("3", timeout=WAIT_MS)
    expect(page.locator('[data-section="summary"] .state')).to_have_text("Failed", timeout=WAIT_MS)
    reason = next(r.reason for r in jobs.get("broken").replicas if r.replica_type == "Master")
    assert reason
    expect(master.locator(".reason")).to_have_text(reason)
    expect(master).to_have_class(re.compile(r"\bfailed\b"))
    # The worker kubemill stopped when the job failed is not the one marked failed.
    expect(page.locator('tr[data-replica="worker-0"]')).not_to_have_class(
        re.compile(r"\bfailed\b"), timeout=WAIT_MS
    )
    # Its life on the job's time line: a red bar, placed by the script.
    bar = page.locator(".life-bar.phase-failed")
    expect(bar).to_have_count(1)
    expect(bar).to_have_attribute("style", re.compile(r"width: \d"))
    # A failed job can only be deleted.
    for verb in ("Suspend", "Resume", "Interrupt"):
        expect(page.get_by_role("button", name=verb)).to_be_disabled()
    expect(page.get_by_role("button", name="Delete")).to_be_enabled()
    photograph(page, shots, "job-failed")
    page.set_viewport_size(PHONE)
    photograph(page, shots, "job-failed-phone")


def test_actions_and_submit_from_the_pages(
    dashboard: str, browser: Browser, jobs: JobClient, shots: Path
) -> None:
    page = browser.new_page(viewport=DESKTOP)
    page.goto(f"{dashboard}submit")
    typo = pytorch_manifest("typo", "print(1)").replace("restartPolicy", "restartPolicyy")
    page.get_by_label("Manifest").fill(typo)
    page.get_by_role("button", name="Submit").click()
    problem = page.locator(".problems code.path")
    expect(problem).to_have_text("spec.pytorchReplicaSpecs.Master.restartPolicyy")
    photograph(page, shots, "submit-typo")
    assert jobs.list() == []

    page.get_by_label("Manifest").fill(pytorch_manifest("paused", SLEEPER))
    page.get_by_role("button", name="Submit").click()
    page.wait_for_url(re.compile(re.escape(page_of("paused")) + "$"))
    state = page.locator('[data-section="summary"] .state')
    expect(state).to_have_text("Running", timeout=WAIT_MS)
    expect(page.get_by_role("button", name="Resume")).to_be_disabled()
    page.get_by_role("button", name="Suspend").click()
    expect(state).to_have_text("Suspended", timeout=WAIT_MS)
    expect(page.get_by_role("button", name="Suspend")).to_be_disabled(timeout=WAIT_MS)
    eventually(lambda: jobs.get("paused").phase == "Suspended")
    page.get_by_role("button", name="Resume").click()
    expect(state).to_have_text("Running", timeout=WAIT_MS)
    photograph(page, shots, "job-running")

    # Delete asks first; dismissed, nothing happens; accepted, the job is gone.
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.get_by_role("button", name="Delete").click()
    time.sleep(0.5)  # give a wrongly sent request the time to land
    assert jobs.get("paused").phase == "Running"
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete").click()
    page.wait_for_url(dashboard)
    assert jobs.list() == []


REPORTER = (
    "import kubemill, time\n"
    "for epoch in range(1, 7):\n"
    "    kubemill.report(step=epoch, total=6, loss=1 / epoch, accuracy=epoch / 6)\n"
    "    time.sleep(0.4)\n"
)
"""Six epochs reported with their loss and accuracy, while the page is open."""


def test_the_loss_plot_grows_while_the_job_reports(
    dashboard: str, browser: Browser, jobs: JobClient, shots: Path
) -> None:
    jobs.submit(pytorch_manifest("plots", REPORTER))
    eventually(lambda: jobs.get("plots").status.trainer_status is not None, "a first report")
    page = browser.new_page(viewport=DESKTOP)
    open_job_page(page, dashboard, "plots")
    page.evaluate("window.notReloaded = true")
    loss = page.locator('svg[data-metric="loss"] polyline')
    expect(loss).to_have_count(1, timeout=WAIT_MS)
    expect(page.locator('[data-section="summary"] .state')).to_have_text(
        "Succeeded", timeout=WAIT_MS
    )
    # Every report is a point of the line, drawn by the shipped script without a reload.
    expect(page.locator('svg[data-metric="accuracy"]')).to_have_count(1)
    points = eventually(
        lambda: (drawn := loss.get_attribute("points") or "").count(",") == 6 and drawn,
        "six points on the loss line",
    )
    heights = [float(pair.split(",")[1]) for pair in str(points).split()]
    # The loss falls, so the line goes down the picture (SVG's y grows downwards).
    assert heights == sorted(heights)
    assert page.evaluate("window.notReloaded") is True
    expect(page.locator('[data-section="progress"] dd').first).to_have_text("100%")
    photograph(page, shots, "job-progress")


def test_the_resources_plot_shows_a_busy_replicas_cpu_and_memory(
    dashboard: str, browser: Browser, jobs: JobClient, shots: Path
) -> None:
    jobs.submit(pytorch_manifest("burner", BURNER))
    page = browser.new_page(viewport=DESKTOP)
    open_job_page(page, dashboard, "burner")
    page.evaluate("window.notReloaded = true")
    # Drawn by the server as the supervisor samples the replica, pushed without a reload.
    for plot in ("cpu", "memory"):
        line = page.locator(f'.plot-{plot} svg polyline[data-replica="master-0"]')
        expect(line).to_have_count(1, timeout=WAIT_MS)
    # A second sample (3 s on) makes a line of the dot.
    cpu = page.locator('.plot-cpu svg polyline[data-replica="master-0"]')
    eventually(lambda: len((cpu.get_attribute("points") or "").split()) >= 2, "two samples")
    expect(page.locator('[data-section="resources"] dd').first).to_contain_text(
        "MiB", timeout=WAIT_MS
    )
    assert page.evaluate("window.notReloaded") is True
    photograph(page, shots, "job-resources")


def test_lines_the_server_skipped_show_where_how_many_and_the_download(
    dashboard: str, browser: Browser, jobs: JobClient, shots: Path
) -> None:
    # The server's side (which lines it skips, and when) is tested in
    # test_dashboard_log_follow.py; here the page gets the events it would send.
    jobs.submit(pytorch_manifest("gappy", "print('hello', flush=True)"))
    events = [
        ("lines", [{"replica": "master-0", "text": f"line {i}", "time": None} for i in (0, 1)]),
        ("skipped", {"lines": 90}),
        ("lines", [{"replica": "master-0", "text": "line 92", "time": None}]),
        ("lines", [{"replica": "master-0", "text": "line 99", "rotatedAway": 2048}]),
        ("end", {}),
    ]
    body = "".join(f"event: {event}\ndata: {json.dumps(data)}\n\n" for event, data in events)
    page = browser.new_page(viewport=DESKTOP)
    page.route(
        "**/api" + page_of("gappy", "/logs/stream*"),
        lambda route: route.fulfill(
            status=200, headers={"Content-Type": "text/event-stream"}, body=body
        ),
    )
    open_job_page(page, dashboard, "gappy", "/logs?replica=master-0")
    state = page.locator("#log-state")
    expect(state).to_contain_text("90 lines are not shown here", timeout=WAIT_MS)
    rows = page.locator("#log > div")
    expect(rows).to_have_count(6)
    assert rows.nth(0).inner_text() == "line 0" and rows.nth(3).inner_text() == "line 92"
    # Lines the log itself let go before the server read them: said where, not in the
    # download either.
    expect(rows.nth(4)).to_contain_text("2 KiB of this log were rotated away")
    assert rows.nth(4).get_attribute("role") == "note"
    assert rows.nth(5).inner_text() == "line 99"
    gap = rows.nth(2)
    assert gap.get_attribute("role") == "note"
    expect(gap).to_contain_text("90 lines skipped here")
    link = gap.get_by_role("link", name="download the log")
    download = page.get_by_role("link", name="Download", exact=True)
    assert link.get_attribute("href") == download.get_attribute("href")
    expect(page.locator("#log-count")).to_have_text("4 lines, 90 skipped")
    page.locator("#log-search").fill("line 9")
    expect(page.locator("#log-count")).to_have_text("2 of 4 lines match, 90 skipped")
    expect(gap).to_be_visible()  # the search hides lines, never the gap
    photograph(page, shots, "logs-skipped")


def test_a_broken_logs_stream_is_not_reopened_and_says_where_it_broke(
    dashboard: str, browser: Browser, jobs: JobClient
) -> None:
    # Reopened, the stream would start again from the log's last lines: some shown twice,
    # those written meanwhile never. The page says where it broke instead.
    jobs.submit(pytorch_manifest("broken", "print('hello', flush=True)"))
    lines = [{"replica": "master-0", "text": "line 0", "time": None}]
    body = f"event: lines\ndata: {json.dumps(lines)}\n\n"  # and the connection closes
    page = browser.new_page(viewport=DESKTOP)
    page.route(
        "**/api" + page_of("broken", "/logs/stream*"),
        lambda route: route.fulfill(
            status=200, headers={"Content-Type": "text/event-stream"}, body=body
        ),
    )
    open_job_page(page, dashboard, "broken", "/logs?replica=master-0")
    expect(page.locator("#log-state")).to_have_text("disconnected", timeout=WAIT_MS)
    rows = page.locator("#log > div")
    expect(rows).to_have_count(2)
    assert rows.nth(0).inner_text() == "line 0"
    expect(rows.nth(1)).to_contain_text("the connection to the server was lost here")
    expect(rows.nth(1).get_by_role("link", name="download the log")).to_have_attribute(
        "href", page_of("broken", "/logs.txt?replica=master-0")
    )


def test_a_page_keeps_the_last_lines_and_says_how_many_earlier_ones_it_let_go(
    dashboard: str, browser: Browser, jobs: JobClient
) -> None:
    # A log followed for an hour at 1 MB/s is 36 million lines: the page keeps the last
    # 50,000 (LOG_KEEP in dashboard.js) and says how many earlier ones it let go.
    jobs.submit(pytorch_manifest("long", "print('hello', flush=True)"))
    total, batch = 50_010, 500
    events = [
        "event: lines\ndata: "
        + json.dumps(
            [
                {"replica": "master-0", "text": f"line {i}", "time": None}
                for i in range(start, min(total, start + batch))
            ]
        )
        + "\n\n"
        for start in range(0, total, batch)
    ]
    body = "".join(events) + "event: end\ndata: {}\n\n"
    page = browser.new_page(viewport=DESKTOP)
    page.route(
        "**/api" + page_of("long", "/logs/stream*"),
        lambda route: route.fulfill(
            status=200, headers={"Content-Type": "text/event-stream"}, body=body
        ),
    )
    open_job_page(page, dashboard, "long", "/logs?replica=master-0")
    expect(page.locator("#log-state")).to_contain_text("has ended", timeout=WAIT_MS)
    expect(page.locator("#log-count")).to_have_text("50000 lines, 10 earlier not kept here")
    rows = page.locator("#log > div")
    expect(rows).to_have_count(50_001)
    expect(rows.nth(0)).to_contain_text("10 earlier lines are no longer kept on this page")
    expect(rows.nth(0).get_by_role("link", name="download the log")).to_have_attribute(
        "href", page_of("long", "/logs.txt?replica=master-0")
    )
    assert rows.nth(1).inner_text() == "line 10"
    assert rows.nth(50_000).inner_text() == f"line {total - 1}"
