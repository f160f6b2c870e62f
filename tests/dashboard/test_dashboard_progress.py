"""The job page's progress panel: a real local job reports with ``kubemill.report``; the
page holds the latest numbers in words and every report's step and metrics for the plot
(the shipped script draws one SVG per metric from them; the browser test looks at it)."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from dashboard_support import eventually_async, pytorch_manifest, sse_events
from test_dashboard_server import phase, submit

from kubemill.dashboard.security import Guard
from kubemill.sdk import JobClient

pytestmark = pytest.mark.asyncio

Web = TestClient[Any, Any]

TRAINS = (
    "import kubemill\n"
    "for epoch in range(1, 6):\n"
    "    kubemill.report(step=epoch, total=5, loss=1 / epoch, accuracy=epoch / 5)\n"
)
"""Five epochs, each reported with its loss and accuracy."""


def plot_points(page: str) -> list[dict[str, Any]]:
    found = re.search(r'class="plots" data-points="([^"]*)"', page)
    assert found, "no plot data on the page"
    points: list[dict[str, Any]] = json.loads(html.unescape(found.group(1)))
    return points


async def test_the_job_page_has_the_plots_points_and_the_latest_numbers(
    web: Web, jobs: JobClient, guard: Guard
) -> None:
    await submit(web, guard, pytorch_manifest("trains", TRAINS))
    await phase(jobs, "trains", "Succeeded")
    page = await (await web.get("/jobs/default/trains")).text()
    assert 'id="h-progress"' in page
    points = plot_points(page)
    assert [p["step"] for p in points] == [1, 2, 3, 4, 5]
    assert [p["metrics"]["loss"] for p in points] == [1.0, 0.5, 1 / 3, 0.25, 0.2]
    assert [p["metrics"]["accuracy"] for p in points] == [0.2, 0.4, 0.6, 0.8, 1.0]
    words = page.split('data-section="progress"')[1].split("</dl>")[0]
    assert "<dd>100%</dd>" in words
    assert "<dt>loss</dt><dd>0.2</dd>" in words and "<dt>accuracy</dt><dd>1</dd>" in words
    # The SDK gives the same reports.
    assert [p.step for p in jobs.progress("trains")] == [1, 2, 3, 4, 5]


async def test_a_job_without_reports_has_no_progress_panel(
    web: Web, jobs: JobClient, guard: Guard
) -> None:
    await submit(web, guard, pytorch_manifest("silent", "print('hi')"))
    await phase(jobs, "silent", "Succeeded")
    page = await (await web.get("/jobs/default/silent")).text()
    assert 'id="h-progress"' not in page and "data-points" not in page


async def test_the_pushed_job_carries_the_progress_section(
    web: Web, jobs: JobClient, guard: Guard
) -> None:
    code = "import kubemill, time\nkubemill.report(step=1, total=2, loss=0.7)\ntime.sleep(120)\n"
    await submit(web, guard, pytorch_manifest("pushed", code))
    await eventually_async(
        lambda: jobs.get("pushed").status.trainer_status is not None, what="the first report"
    )
    response = await web.get("/api/jobs/default/pushed/stream")
    async for event, data in sse_events(response):
        if event == "job" and "progress" in data["sections"]:
            assert plot_points(data["sections"]["progress"]) == [
                {"step": 1, "metrics": {"loss": 0.7}}
            ]
            break
    response.close()
