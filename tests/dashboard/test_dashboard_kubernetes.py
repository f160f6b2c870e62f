"""The dashboard on the Kubernetes substrate: the same server over ``JobClient("kubernetes")``
against the Kubernetes client tests' served API (kmock), where the test plays the operator
and the kubelet: the list, one job, and an action reaching the job's object."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from kubemill.dashboard.security import CSRF_HEADER, Guard
from kubemill.dashboard.server import build_app
from kubemill.sdk import JobClient
from support import kmock_cluster
from support.kube_client_support import SEED_TFJOB as MANIFEST
from support.kube_client_support import ClientClusterThread, Operator, running

pytestmark = pytest.mark.asyncio


@pytest.fixture
def cluster() -> Iterator[ClientClusterThread]:
    with ClientClusterThread() as thread:
        thread.install_crds()
        thread.create_namespaces("ml")
        yield thread


async def test_the_list_one_job_and_an_action_on_kubernetes(
    cluster: ClientClusterThread, tmp_path: Path
) -> None:
    kubeconfig = kmock_cluster.write_kubeconfig(tmp_path / "kubeconfig", cluster.url)
    jobs = JobClient("kubernetes", kubeconfig=str(kubeconfig), context="kmock", namespace="ml")
    operator = Operator(cluster)
    guard = Guard()
    web: TestClient[Any, Any]
    async with TestClient(TestServer(build_app(jobs, guard=guard), host="127.0.0.1")) as web:
        headers = {CSRF_HEADER: guard.csrf_token, "Origin": str(web.make_url("")).rstrip("/")}
        created = await web.post("/api/submit", json={"manifest": MANIFEST}, headers=headers)
        assert created.status == 200, await created.text()
        assert (await created.json())["url"] == "/jobs/ml/seed"
        await asyncio.to_thread(operator.create_pods, "tfjobs", "ml", "seed")
        await asyncio.to_thread(
            operator.pod_status, "ml", "seed-worker-0", running("tensorflow", ip="10.2.0.4")
        )

        listed = await (await web.get("/api/jobs")).json()
        assert [(j["namespace"], j["name"], j["kind"]) for j in listed["jobs"]] == [
            ("ml", "seed", "TFJob")
        ]
        page = await (await web.get("/jobs/ml/seed")).text()
        worker = page.split('data-replica="worker-0"')[1].split("</tr>")[0]
        assert "state-running" in worker and "10.2.0.4:2222" in worker

        suspended = await web.post("/api/jobs/ml/seed/suspend", headers=headers)
        assert suspended.status == 200, await suspended.text()
        view = await asyncio.to_thread(jobs.get, "seed")
        assert view.job.run_policy.suspend is True  # the operator acts on it from here

        deleted = await web.post("/api/jobs/ml/seed/delete", headers=headers)
        assert (await deleted.json())["deleted"] is True
        assert await asyncio.to_thread(jobs.list) == []
    jobs.backend.close()  # type: ignore[attr-defined]
