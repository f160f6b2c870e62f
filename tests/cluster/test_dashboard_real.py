"""The dashboard on the Kubernetes substrate, over the real API server: its HTTP API and
pages (as its own pages call them) with the operator running as its own ServiceAccount,
the real kube-scheduler binding the pods and the node stand-in playing them.

A job submitted through the dashboard is listed, its page shows its replicas running,
its logs stream shows what a container printed (through the API server's proxy to the
node), and a suspend and a resume sent from the dashboard reach the job: the operator
deletes its pods and creates them again. The delete removes it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer

from kubemill.dashboard.security import CSRF_HEADER, Guard
from kubemill.dashboard.server import build_app
from kubemill.sdk import JobClient
from support.control_plane import ControlPlane
from support.node import NodeStandIn
from support.operator_jobs import pytorchjob
from support.waiting import eventually

pytestmark = [pytest.mark.usefixtures("operator"), pytest.mark.asyncio]

WAIT = 60.0
"""Upper bound on the operator, the controllers and the dashboard acting: a hang guard."""

Web = TestClient[Any, Any]


async def until(check: Callable[[], Any], what: str) -> Any:
    """Wait for ``check`` in a thread, so the dashboard keeps serving meanwhile."""
    return await asyncio.to_thread(eventually, check, what, timeout=WAIT)


def pods(plane: ControlPlane, namespace: str) -> dict[str, str]:
    """The job's pods, name to uid."""
    listing = plane.request(
        "GET", f"/api/v1/namespaces/{namespace}/pods?labelSelector=kubemill.dev/job-name%3Ddash"
    )
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in listing["items"]}


def running(plane: ControlPlane, node: NodeStandIn, namespace: str) -> bool:
    names = pods(plane, namespace)
    return set(names) == {"dash-master-0", "dash-worker-0"} and all(
        node.running(namespace, name) for name in names
    )


async def listed(web: Web) -> list[tuple[str, str, str, str]]:
    jobs = (await (await web.get("/api/jobs")).json())["jobs"]
    return [(j["namespace"], j["name"], j["kind"], j["state"]) for j in jobs]


async def test_the_list_one_job_logs_and_suspend_through_the_dashboard(
    control_plane: ControlPlane, node: NodeStandIn
) -> None:
    namespace = control_plane.new_namespace()
    client = JobClient(
        "kubernetes", kubeconfig=str(control_plane.admin_kubeconfig), namespace=namespace
    )
    guard = Guard()
    app = build_app(client, guard=guard, poll_seconds=0.2)
    web: Web
    async with TestClient(TestServer(app, host="127.0.0.1")) as web:
        headers = {CSRF_HEADER: guard.csrf_token, "Origin": str(web.make_url("")).rstrip("/")}
        manifest = yaml.safe_dump(pytorchjob("dash"))
        created = await web.post("/api/submit", json={"manifest": manifest}, headers=headers)
        assert created.status == 200, await created.text()
        page_path = f"/jobs/{namespace}/pytorchjob%2Fdash"  # its kind and name, as kubectl
        assert (await created.json())["url"] == page_path
        await until(lambda: running(control_plane, node, namespace), "master and worker running")
        await until(lambda: client.get("dash").phase == "Running", "the job Running")

        # The list: the job, Running, as the API server holds it.
        assert await listed(web) == [(namespace, "dash", "PyTorchJob", "Running")]
        page = await web.get("/")
        assert page.status == 200 and 'data-name="dash"' in await page.text()

        # One job's page: each replica's row, running, on the node the scheduler chose.
        page = await web.get(page_path)
        assert page.status == 200
        html = await page.text()
        for replica in ("master-0", "worker-0"):
            row = html.split(f'data-replica="{replica}"')[1].split("</tr>")[0]
            assert "state-running" in row, row
        assert "kind: PyTorchJob" in html

        # Its logs: a line the container prints reaches the stream.
        node.write_log(namespace, "dash-master-0", "pytorch", "epoch 1 loss 0.25")
        stream_path = f"/api{page_path}/logs/stream?replica=master-0"
        async with web.get(stream_path) as stream:
            assert stream.status == 200
            text = ""
            async for raw in stream.content:
                text += raw.decode()
                if "epoch 1 loss 0.25" in text:
                    break
            assert '"replica": "master-0"' in text

        # Suspend, from the dashboard: the operator deletes the pods, the job is Suspended.
        first = set(pods(control_plane, namespace).values())
        suspended = await web.post(f"/api{page_path}/suspend", headers=headers)
        assert suspended.status == 200, await suspended.text()
        assert (await suspended.json())["ok"] is True
        await until(lambda: not pods(control_plane, namespace), "the pods gone")
        await until(lambda: client.get("dash").phase == "Suspended", "the job Suspended")
        assert await listed(web) == [(namespace, "dash", "PyTorchJob", "Suspended")]
        html = await (await web.get(page_path)).text()
        summary = html.split('data-section="summary"')[1].split("</section>")[0]
        assert "Suspended" in summary

        # Resume: new pods, running again.
        resumed = await web.post(f"/api{page_path}/resume", headers=headers)
        assert resumed.status == 200, await resumed.text()
        await until(lambda: running(control_plane, node, namespace), "running again")
        assert not first & set(pods(control_plane, namespace).values()), "the same pods"
        await until(lambda: client.get("dash").phase == "Running", "the job Running again")

        # A request from another origin changes nothing.
        foreign = {CSRF_HEADER: guard.csrf_token, "Origin": "http://evil.example"}
        refused = await web.post(f"/api{page_path}/delete", headers=foreign)
        assert refused.status == 403
        assert client.get("dash").phase == "Running"

        deleted = await web.post(f"/api{page_path}/delete", headers=headers)
        assert (await deleted.json())["deleted"] is True
        await until(lambda: not client.list(), "the job gone")
        assert await listed(web) == []
    client.backend.close()  # type: ignore[attr-defined]
