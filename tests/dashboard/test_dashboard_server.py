"""The dashboard's server against a live local substrate: real jobs (``python -c``
programs run by the local supervisor), read and changed only through the HTTP API and
pages, checked through the SDK."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from dashboard_support import (
    SLEEPER,
    eventually_async,
    page_of,
    pytorch_manifest,
    sse_events,
)

from kubemill.api import ConditionType
from kubemill.dashboard.security import CSRF_HEADER, Guard
from kubemill.dashboard.views import iso
from kubemill.sdk import JobClient, JobNotFound

pytestmark = pytest.mark.asyncio

Web = TestClient[Any, Any]

FAILING = "import sys; print('about to fail', flush=True); sys.exit(3)"
COUNTER = (
    "import time\nfor i in range(6):\n    print(f'line {i}', flush=True)\n    time.sleep(0.3)\n"
)


def same_origin(web: Web, guard: Guard) -> dict[str, str]:
    """The headers the dashboard's own page sends with an action."""
    return {
        "Origin": str(web.make_url("")).rstrip("/"),
        "Sec-Fetch-Site": "same-origin",
        CSRF_HEADER: guard.csrf_token,
    }


async def submit(web: Web, guard: Guard, manifest: str) -> dict[str, Any]:
    response = await web.post(
        "/api/submit", json={"manifest": manifest}, headers=same_origin(web, guard)
    )
    body: dict[str, Any] = await response.json()
    assert response.status == 200, body
    assert body["created"] is True
    return body


async def phase(jobs: JobClient, name: str, wanted: str) -> None:
    await eventually_async(lambda: jobs.get(name).phase == wanted, what=f"{name} {wanted}")


async def test_the_jobs_list_shows_a_job_and_pushes_its_changes(
    web: Web, jobs: JobClient, guard: Guard
) -> None:
    await submit(web, guard, pytorch_manifest("listed", "import time; time.sleep(1.5)"))
    page = await web.get("/")
    assert page.status == 200
    html = await page.text()
    assert 'data-name="listed"' in html and "PyTorchJob" in html
    assert 'data-filter="kind"' in html and 'data-filter="state"' in html

    # The stream pushes the whole table first, then only the job's row each time it
    # changes (and nothing when nothing did), until the job is done.
    states: list[str] = []
    messages: list[dict[str, Any]] = []
    async with web.get("/api/stream/jobs") as stream:
        assert stream.headers["Content-Type"].startswith("text/event-stream")
        async for event, data in sse_events(stream):
            assert event == "jobs"
            messages.append(data)
            assert [row["key"] for row in data["rows"]] == [
                "default/pytorchjobs.kubemill.dev/listed"
            ]
            html = data["rows"][0]["html"]
            assert 'data-name="listed"' in html
            state = html.split('data-state="')[1].split('"')[0]
            assert not messages[1:] or html != messages[-2]["rows"][0]["html"], "sent unchanged"
            if not states or states[-1] != state:
                states.append(state)
            if state == "Succeeded":
                assert data["options"]["state"] == ["Succeeded"]
                break
    assert "Running" in states, states
    assert states[-1] == "Succeeded"
    assert messages[0]["full"] and not any(m["full"] for m in messages[1:])

    listed = await (await web.get("/api/jobs")).json()
    assert [(j["name"], j["state"], j["replicas"]) for j in listed["jobs"]] == [
        ("listed", "Succeeded", "1/1")
    ]
    filtered = await (await web.get("/?kind=TFJob")).text()
    assert 'data-name="listed"' not in filtered


async def test_the_jobs_stream_pushes_only_the_rows_added_changed_or_removed(
    web: Web, jobs: JobClient, guard: Guard
) -> None:
    await submit(web, guard, pytorch_manifest("first", "pass"))
    await phase(jobs, "first", "Succeeded")
    async with web.get("/api/stream/jobs") as stream:
        events = sse_events(stream)
        _, table = await anext(events)
        assert table["full"] and [row["key"] for row in table["rows"]] == [
            "default/pytorchjobs.kubemill.dev/first"
        ]
        first_row = table["rows"][0]

        await submit(web, guard, pytorch_manifest("second", "pass"))
        seen: list[dict[str, Any]] = []
        while not any('data-state="Succeeded"' in row["html"] for m in seen for row in m["rows"]):
            _, message = await anext(events)
            assert not message["full"]
            # The finished job's row is never sent again: only the new job's.
            assert [row["key"] for row in message["rows"]] == [
                "default/pytorchjobs.kubemill.dev/second"
            ], message
            seen.append(message)
        newest = seen[-1]["rows"][0]
        assert newest["order"] > first_row["order"]  # the page puts it above the first

        await web.post("/api/jobs/default/first/delete", headers=same_origin(web, guard))
        _, message = await anext(events)
        assert (
            message["removed"] == ["default/pytorchjobs.kubemill.dev/first"]
            and message["rows"] == []
        )


async def test_the_job_page_shows_the_failed_replica_its_exit_code_and_reason(
    web: Web, jobs: JobClient, guard: Guard
) -> None:
    await submit(web, guard, pytorch_manifest("broken", FAILING, workers=1, worker_code=SLEEPER))
    await phase(jobs, "broken", "Failed")
    await eventually_async(lambda: all(r.finished for r in jobs.get("broken").replicas))
    html = await (await web.get("/jobs/default/broken")).text()
    master = html.split('data-replica="master-0"')[1].split("</tr>")[0]
    assert 'class="num exit">3<' in master
    view = jobs.get("broken")
    reason = next(r.reason for r in view.replicas if r.replica_type == "Master")
    assert reason and f'class="reason">{reason}<' in master
    # Conditions in the order they happened, the events, the manifest as YAML.
    timeline = html.split('class="timeline"')[1].split("</ol>")[0]
    happened = sorted(view.status.conditions, key=lambda c: iso(c.last_transition_time))
    shown = [timeline.index(f'state-{c.type.value.lower()}"') for c in happened]
    assert shown == sorted(shown) and len(happened) >= 2
    assert timeline.index("state-created") < timeline.index("state-failed")
    assert any(e.reason in html for e in jobs.events("broken"))
    assert "kind: PyTorchJob" in html and "pytorchReplicaSpecs:" in html
    # What the operator creates for it, shown for a finished job too.
    assert "What the operator creates" in html and "name: broken-master-0" in html
    missing = await web.get("/jobs/default/nobody")
    assert missing.status == 404


async def test_logs_follow_live_and_download(web: Web, jobs: JobClient, guard: Guard) -> None:
    await submit(web, guard, pytorch_manifest("talker", COUNTER))
    # A bare name typed (or kept from before) opens the page; the page's own links, its
    # stream's too, name the job by KIND/NAME.
    page = await web.get("/jobs/default/talker/logs?replica=master-0")
    stream_path = "/api" + page_of("talker", "/logs/stream")
    assert page.status == 200 and f'data-stream="{stream_path}' in await page.text()
    seen: list[str] = []
    ended = False
    async with web.get(f"{stream_path}?replica=master-0") as stream:
        async for event, data in sse_events(stream):
            if event == "lines":
                seen += [line["text"] for line in data]
                assert {line["replica"] for line in data} == {"master-0"}
                if len(seen) == 1:
                    # The first line came while the job still ran: it was followed live.
                    assert not (await asyncio.to_thread(jobs.get, "talker")).finished
            elif event == "end":
                ended = True
                break
    assert ended
    assert seen == [f"line {i}" for i in range(6)]
    download = await web.get(page_of("talker", "/logs.txt"))
    assert download.status == 200
    assert download.headers["Content-Disposition"] == 'attachment; filename="talker.log"'
    assert await download.text() == "".join(f"master-0 | line {i}\n" for i in range(6))


async def test_actions_reach_the_job(web: Web, jobs: JobClient, guard: Guard) -> None:
    await submit(web, guard, pytorch_manifest("acted", SLEEPER))
    await phase(jobs, "acted", "Running")
    headers = same_origin(web, guard)

    suspended = await web.post("/api/jobs/default/acted/suspend", headers=headers)
    assert suspended.status == 200, await suspended.text()
    await phase(jobs, "acted", "Suspended")
    resumed = await web.post("/api/jobs/default/acted/resume", headers=headers)
    assert resumed.status == 200, await resumed.text()
    await phase(jobs, "acted", "Running")

    interrupted = await web.post("/api/jobs/default/acted/interrupt", headers=headers)
    assert (await interrupted.json())["ok"] is True
    view = await asyncio.to_thread(jobs.get, "acted")
    failed = view.status.condition(ConditionType.FAILED)
    assert failed is not None and failed.reason == "Interrupted", view.status
    assert "kubemill dashboard" in failed.message
    again = await web.post("/api/jobs/default/acted/suspend", headers=headers)
    assert again.status == 409  # a finished job cannot be suspended: the SDK's refusal
    assert (await again.json())["ok"] is False

    deleted = await web.post("/api/jobs/default/acted/delete", headers=headers)
    assert (await deleted.json())["deleted"] is True
    with pytest.raises(JobNotFound):
        await asyncio.to_thread(jobs.get, "acted")
    gone = await web.post("/api/jobs/default/acted/resume", headers=headers)
    assert gone.status == 404


async def test_a_manifest_with_a_typo_shows_the_field_path_and_creates_nothing(
    web: Web, jobs: JobClient, guard: Guard
) -> None:
    typo = pytorch_manifest("typo", "print(1)").replace("restartPolicy", "restartPolicyy")
    for validate_only in (True, False):
        response = await web.post(
            "/api/submit",
            json={"manifest": typo, "validateOnly": validate_only},
            headers=same_origin(web, guard),
        )
        assert response.status == 422
        body = await response.json()
        assert body["ok"] is False
        paths = [e["path"] for e in body["errors"]]
        assert paths == ["spec.pytorchReplicaSpecs.Master.restartPolicyy"]
        assert "did you mean" in body["errors"][0]["hint"]
        assert "spec.pytorchReplicaSpecs.Master.restartPolicyy</code>" in body["html"]
    assert await asyncio.to_thread(jobs.list) == []
    # A valid one checked without submitting creates nothing either.
    checked = await web.post(
        "/api/submit",
        json={"manifest": pytorch_manifest("fine", "print(1)"), "validateOnly": True},
        headers=same_origin(web, guard),
    )
    assert (await checked.json())["created"] is False
    assert await asyncio.to_thread(jobs.list) == []
    # Pasted text is YAML, never a path the server would read.
    path = await web.post(
        "/api/submit", json={"manifest": "/etc/passwd.yaml"}, headers=same_origin(web, guard)
    )
    assert path.status == 422


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"},
        {"Origin": "http://evil.example"},
        {"Sec-Fetch-Site": "same-site"},
        {},  # a plain form post: no CSRF header
        {CSRF_HEADER: "guessed"},
    ],
    ids=["cross-site", "foreign-origin", "same-site", "no-csrf-header", "wrong-csrf-token"],
)
async def test_a_request_from_another_origin_cannot_change_a_job(
    web: Web, jobs: JobClient, guard: Guard, headers: dict[str, str]
) -> None:
    await submit(web, guard, pytorch_manifest("target", SLEEPER))
    await phase(jobs, "target", "Running")
    sent = dict(headers)
    if "Origin" in sent or "Sec-Fetch-Site" in sent:
        # The attacker's page cannot know the token; give it the real one to show the
        # origin check stands on its own.
        sent[CSRF_HEADER] = guard.csrf_token
    for verb in ("suspend", "interrupt", "delete"):
        refused = await web.post(
            f"/api/jobs/default/target/{verb}",
            data="x=1",
            headers={**sent, "Content-Type": "application/x-www-form-urlencoded"},
        )
        assert refused.status == 403, await refused.text()
    created = await web.post(
        "/api/submit", json={"manifest": pytorch_manifest("planted", "print(1)")}, headers=sent
    )
    assert created.status == 403
    view = await asyncio.to_thread(jobs.get, "target")
    assert view.phase == "Running"
    assert [v.name for v in await asyncio.to_thread(jobs.list)] == ["target"]


async def test_a_host_name_other_than_loopback_is_not_served_without_a_token(web: Web) -> None:
    # A page whose host name was made to resolve to 127.0.0.1 (DNS rebinding) sends its own
    # name in Host: without a token, only loopback names are served.
    rebound = await web.get("/", headers={"Host": "evil.example:8790"})
    assert rebound.status == 401
    assert (await web.get("/", headers={"Host": "localhost:8790"})).status == 200


MPI_SSH = """
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: keyed}
spec:
  slotsPerWorker: 1
  runPolicy: {suspend: true}
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers: [{name: l, image: local-python, command: [mpirun, -np, "1", hostname]}]
    Worker:
      replicas: 1
      template: {spec: {containers: [{name: w, image: local-python}]}}
"""


async def test_a_job_with_a_secret_shows_no_secret_value(web: Web, guard: Guard) -> None:
    # An MPIJob in ssh mode gets a per-job Secret holding an SSH key pair. Suspended, it
    # runs nothing here; its page still shows what it is made of.
    await submit(web, guard, MPI_SSH)
    html = await (await web.get("/jobs/default/keyed")).text()
    assert "kind: Secret" in html and "keyed-ssh" in html
    assert "ssh-privatekey: &#x27;&#x27;" in html
    assert "kubemill.dev/redacted" in html
    # No key, in PEM form or base64-encoded ("-----BEGIN" is "LS0tLS1CRUdJTi").
    assert "PRIVATE KEY" not in html and "LS0tLS1CRUdJTi" not in html
    assert "ssh-ed25519 " not in html and "ssh-rsa " not in html
