"""The dashboard on the Kubernetes substrate: the same server over ``JobClient("kubernetes")``
against the Kubernetes client tests' served API (kmock), where the test plays the operator
and the kubelet: the list, one job, and an action reaching the job's object; a job of an
upstream group beside ours of the same name; two kinds of ours sharing a name; the records
of deleted jobs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer

from kubemill.api import API_VERSION
from kubemill.dashboard.security import CSRF_HEADER, Guard
from kubemill.dashboard.server import build_app
from kubemill.sdk import JobClient, ReplicaView
from kubemill.substrates.base import SubstrateError
from kubemill.substrates.kubernetes.history import PostedEvent, build_record
from kubemill.substrates.kubernetes.install import DEFAULT_NAMESPACE
from support import kmock_cluster
from support.kube_client_support import SEED_PYTORCHJOB, ClientClusterThread, Operator, running
from support.kube_client_support import SEED_TFJOB as MANIFEST
from support.upstream_crds import upstream_crd

pytestmark = pytest.mark.asyncio
Web = TestClient[Any, Any]


@pytest.fixture
def cluster() -> Iterator[ClientClusterThread]:
    with ClientClusterThread() as thread:
        thread.install_crds()
        thread.create_namespaces("ml")
        yield thread


@contextlib.asynccontextmanager
async def dashboard_of(
    cluster: ClientClusterThread, tmp_path: Path
) -> AsyncIterator[tuple[JobClient, Web, dict[str, str]]]:
    """The dashboard over ``JobClient("kubernetes")`` on ``cluster`` (namespace ml): the
    client, a test client of the server, and the headers an action from its pages sends."""
    kubeconfig = kmock_cluster.write_kubeconfig(tmp_path / "kubeconfig", cluster.url)
    jobs = JobClient("kubernetes", kubeconfig=str(kubeconfig), context="kmock", namespace="ml")
    guard = Guard()
    try:
        async with TestClient(TestServer(build_app(jobs, guard=guard), host="127.0.0.1")) as web:
            origin = str(web.make_url("")).rstrip("/")
            yield jobs, web, {CSRF_HEADER: guard.csrf_token, "Origin": origin}
    finally:
        jobs.backend.close()  # type: ignore[attr-defined]


async def test_the_list_one_job_and_an_action_on_kubernetes(
    cluster: ClientClusterThread, tmp_path: Path
) -> None:
    operator = Operator(cluster)
    async with dashboard_of(cluster, tmp_path) as (jobs, web, headers):
        created = await web.post("/api/submit", json={"manifest": MANIFEST}, headers=headers)
        assert created.status == 200, await created.text()
        assert (await created.json())["url"] == "/jobs/ml/tfjob%2Fseed"
        await asyncio.to_thread(operator.create_pods, "tfjobs", "ml", "seed")
        await asyncio.to_thread(
            operator.pod_status, "ml", "seed-worker-0", running("tensorflow", ip="10.2.0.4")
        )

        listed = await (await web.get("/api/jobs")).json()
        assert [(j["namespace"], j["name"], j["kind"]) for j in listed["jobs"]] == [
            ("ml", "seed", "TFJob")
        ]
        page = await (await web.get("/jobs/ml/tfjob%2Fseed")).text()
        worker = page.split('data-replica="worker-0"')[1].split("</tr>")[0]
        assert "state-running" in worker and "10.2.0.4:2222" in worker

        suspended = await web.post("/api/jobs/ml/tfjob%2Fseed/suspend", headers=headers)
        assert suspended.status == 200, await suspended.text()
        view = await asyncio.to_thread(jobs.get, "seed")
        assert view.job.run_policy.suspend is True  # the operator acts on it from here

        deleted = await web.post("/api/jobs/ml/tfjob%2Fseed/delete", headers=headers)
        assert (await deleted.json())["deleted"] is True
        assert await asyncio.to_thread(jobs.list) == []


async def test_a_job_of_an_upstream_group_is_a_row_and_a_page_of_its_own_beside_ours(
    cluster: ClientClusterThread, tmp_path: Path
) -> None:
    # Kubeflow's TFJob CRD served (an operator with --serve-upstream-groups), a TFJob
    # applied there by kubectl, and one of kubemill's own of the same name submitted.
    cluster.cluster.install_crds([upstream_crd("TFJob", "kubeflow.org", "v1")])
    upstream = yaml.safe_load(MANIFEST)
    upstream["metadata"]["name"] = "twin"
    cluster.create("/apis/kubeflow.org/v1/namespaces/ml/tfjobs", upstream)
    async with dashboard_of(cluster, tmp_path) as (jobs, web, headers):
        ours = MANIFEST.replace("name: seed", "name: twin")
        created = await web.post("/api/submit", json={"manifest": ours}, headers=headers)
        assert (await created.json())["url"] == "/jobs/ml/tfjob%2Ftwin"

        # Two rows, each with its own key and a link to its own job.
        listing = await (await web.get("/")).text()
        rows = listing.split("<tbody")[1].split("</tbody>")[0].split("<tr ")[1:]
        keys = sorted(row.split('data-key="')[1].split('"')[0] for row in rows)
        assert keys == ["ml/tfjobs.kubeflow.org/twin", "ml/tfjobs.kubemill.dev/twin"]
        links = sorted(row.split('<a href="')[1].split('"')[0] for row in rows)
        assert links == ["/jobs/ml/tfjob%2Ftwin", "/jobs/ml/tfjobs.kubeflow.org%2Ftwin"]

        for link, api_version in zip(links, ("kubemill.dev/v1", "kubeflow.org/v1"), strict=True):
            page = await (await web.get(link)).text()
            assert f"apiVersion: {api_version}" in page, link
            # The page's stream and actions address the same job.
            assert f'data-stream="/api{link}/stream"' in page
            assert f'data-url="/api{link}/suspend"' in page

        suspended = await web.post(f"/api{links[1]}/suspend", headers=headers)
        assert suspended.status == 200, await suspended.text()
        upstream_now = cluster.get("/apis/kubeflow.org/v1/namespaces/ml/tfjobs/twin")
        assert upstream_now["spec"]["runPolicy"]["suspend"] is True
        ours_now = await asyncio.to_thread(jobs.get, "twin")
        assert not ours_now.job.run_policy.suspend  # the bare name is ours, untouched


async def test_two_kinds_sharing_a_name_are_two_rows_each_linking_to_its_own_page(
    cluster: ClientClusterThread, tmp_path: Path
) -> None:
    # On Kubernetes a name is unique within a kind: a TFJob and a PyTorchJob may both be
    # "twin" in one namespace, and `get twin` asks which. Each row's link names its kind.
    async with dashboard_of(cluster, tmp_path) as (jobs, web, headers):
        for manifest in (MANIFEST, SEED_PYTORCHJOB):
            twin = yaml.safe_load(manifest)
            twin["metadata"]["name"] = "twin"
            body = {"manifest": yaml.safe_dump(twin)}
            created = await web.post("/api/submit", json=body, headers=headers)
            assert created.status == 200, await created.text()
        with pytest.raises(SubstrateError, match="both named 'twin'"):
            await asyncio.to_thread(jobs.get, "twin")

        listing = await (await web.get("/")).text()
        rows = listing.split("<tbody")[1].split("</tbody>")[0].split("<tr ")[1:]
        links = sorted(row.split('<a href="')[1].split('"')[0] for row in rows)
        assert links == ["/jobs/ml/pytorchjob%2Ftwin", "/jobs/ml/tfjob%2Ftwin"]
        for link, kind in zip(links, ("PyTorchJob", "TFJob"), strict=True):
            before = len(cluster.client_calls())
            page = await (await web.get(link)).text()
            assert f"kind: {kind}" in page, link
            assert f'data-stream="/api{link}/stream"' in page
            # The page's reads went to its kind alone: no request to every kind of the
            # group, as finding a bare name takes.
            jobs_read = {c.plural for c in cluster.client_calls()[before:] if c.name == "twin"}
            assert jobs_read == {f"{kind.lower()}s"}, link

        deleted = await web.post("/api/jobs/ml/tfjob%2Ftwin/delete", headers=headers)
        assert (await deleted.json())["deleted"] is True
        remaining = await asyncio.to_thread(jobs.list)
        assert [(v.kind, v.name) for v in remaining] == [("PyTorchJob", "twin")]


async def test_deleted_jobs_are_listed_from_the_operators_records_and_one_shows_its_record(
    cluster: ClientClusterThread, tmp_path: Path
) -> None:
    cluster.create_namespaces(DEFAULT_NAMESPACE)
    job = yaml.safe_load(MANIFEST)
    job["apiVersion"] = API_VERSION  # as the cluster serves it: submitted into our group
    job["metadata"].update(namespace="ml", uid="uid-gone", creationTimestamp="2026-01-01T00:00:00Z")
    job["status"] = {
        "conditions": [
            {"type": "Failed", "status": "True", "lastTransitionTime": "2026-01-01T00:05:00Z"}
        ]
    }
    failed = ReplicaView(
        "seed-worker-0", "Worker", 0, "Failed", exit_code=3, reason="Error", message="boom"
    )
    event = PostedEvent(datetime(2026, 1, 1, 0, 5, tzinfo=UTC), "Warning", "TFJobFailed", "lost")
    # The record as the operator writes it (tests/substrates/kubernetes/operator/test_history).
    record = build_record(
        job,
        namespace=DEFAULT_NAMESPACE,
        replicas=[failed],
        events=[event],
        deleted=datetime(2026, 1, 1, 0, 6, tzinfo=UTC),
    )
    assert record is not None
    cluster.create(f"/api/v1/namespaces/{DEFAULT_NAMESPACE}/configmaps", record)
    # A deleted Kubeflow TFJob of the same name (an operator serving the upstream group).
    upstream = yaml.safe_load(MANIFEST)
    upstream["apiVersion"] = "kubeflow.org/v1"
    upstream["metadata"].update(
        namespace="ml", uid="uid-up", creationTimestamp="2026-01-02T00:00:00Z"
    )
    lost = PostedEvent(datetime(2026, 1, 2, 0, 5, tzinfo=UTC), "Normal", "TFJobSucceeded", "done")
    deleted = datetime(2026, 1, 2, 0, 6, tzinfo=UTC)
    upstream_record = build_record(
        upstream, namespace=DEFAULT_NAMESPACE, replicas=[], events=[lost], deleted=deleted
    )
    assert upstream_record is not None
    cluster.create(f"/api/v1/namespaces/{DEFAULT_NAMESPACE}/configmaps", upstream_record)

    async with dashboard_of(cluster, tmp_path) as (_, web, _):
        listing = await (await web.get("/")).text()
        history = listing.split('id="history-rows"')[1].split("</tbody>")[0]
        assert 'href="/history/uid-gone"' in history and "seed" in history
        assert "Failed" in history and "deleted" in history

        for path in ("/jobs/ml/tfjob%2Fseed", "/jobs/ml/seed", "/history/uid-gone"):
            answer = await web.get(path)
            assert answer.status == 200, path
            page = await answer.text()
            assert "(deleted)" in page
            assert "TFJobFailed" in page and "boom" in page
            assert 'data-action="delete"' not in page  # a record has no actions
        # A link to the deleted upstream job opens its record; a bare name (typed, or kept
        # from before links named the kind) ours, as `get` looks for a bare name.
        upstream_page = await (await web.get("/jobs/ml/tfjobs.kubeflow.org%2Fseed")).text()
        assert "TFJobSucceeded" in upstream_page and "TFJobFailed" not in upstream_page
        assert "apiVersion: kubeflow.org/v1" in upstream_page
        assert "TFJobSucceeded" not in await (await web.get("/jobs/ml/seed")).text()
        assert (await web.get("/history/no-such-uid")).status == 404
