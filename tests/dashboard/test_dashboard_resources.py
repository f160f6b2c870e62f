"""Each replica's CPU and memory over time: sampled by the local supervisor from ``/proc``,
kept with the job after it ends, read through the SDK and drawn on the job page; on
Kubernetes, the page says when the cluster has no metrics API."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from dashboard_support import BURNER, eventually_async, pytorch_manifest

from kubemill.dashboard.security import Guard
from kubemill.dashboard.server import build_app
from kubemill.sdk import JobClient
from kubemill.substrates.kubernetes.client.metrics import NO_METRICS_API, NO_SAMPLES
from support import kmock_cluster
from support.kube_client_support import SEED_TFJOB, ClientClusterThread, Operator, status_body

pytestmark = pytest.mark.asyncio

Web = TestClient[Any, Any]
MiB = 1 << 20


async def test_a_busy_replica_has_cpu_and_memory_samples_kept_after_it_ends(
    web: Web, jobs: JobClient
) -> None:
    await asyncio.to_thread(jobs.submit, pytorch_manifest("burner", BURNER), detach=True)
    await eventually_async(lambda: jobs.get("burner").finished, what="burner finished")
    # Read after the job and its supervisor are done: the samples stay with the job.
    report = await asyncio.to_thread(jobs.resources, "burner")
    assert report.note == ""
    samples = report.replicas["burner-master-0"]
    assert len(samples) >= 2, samples  # 8 s of work, a sample every 3 s
    assert [s.time for s in samples] == sorted(s.time for s in samples)
    assert max(s.cpu_cores for s in samples) > 0, samples  # however loaded the machine
    assert max(s.memory_bytes for s in samples) > 90 * MiB, samples

    page = await (await web.get("/jobs/default/burner")).text()
    section = page.split('data-section="resources"')[1].split("</section>")[0]
    assert section.count('<polyline class="plot-line"') == 2  # CPU and memory, one replica
    assert 'data-replica="master-0"' in section and "MiB" in section and "cores" in section


async def test_a_job_that_never_ran_says_it_has_no_samples(web: Web, jobs: JobClient) -> None:
    await asyncio.to_thread(
        jobs.submit, pytorch_manifest("waiting", "pass", suspend=True), detach=True
    )
    assert (await asyncio.to_thread(jobs.resources, "waiting")).replicas == {}
    page = await (await web.get("/jobs/default/waiting")).text()
    section = page.split('data-section="resources"')[1].split("</section>")[0]
    assert "No samples yet" in section and "<svg" not in section


async def resources_section(jobs: JobClient, path: str) -> str:
    async with TestClient(TestServer(build_app(jobs, guard=Guard()), host="127.0.0.1")) as web:
        page = await (await web.get(path)).text()
    return page.split('data-section="resources"')[1].split("</section>")[0]


async def test_on_kubernetes_the_page_shows_the_metrics_api_or_says_there_is_none(
    tmp_path: Path,
) -> None:
    with ClientClusterThread() as cluster:
        cluster.install_crds()
        cluster.create_namespaces("ml")
        kubeconfig = kmock_cluster.write_kubeconfig(tmp_path / "kubeconfig", cluster.url)
        jobs = JobClient("kubernetes", kubeconfig=str(kubeconfig), context="kmock", namespace="ml")
        try:
            await asyncio.to_thread(jobs.submit, SEED_TFJOB)
            await asyncio.to_thread(Operator(cluster).create_pods, "tfjobs", "ml", "seed")

            # The test server serves the metrics API (its discovery lists it), with no
            # sample of any pod.
            report = await asyncio.to_thread(jobs.resources, "seed")
            assert report.replicas == {} and report.note == NO_SAMPLES
            assert "no sample of this job" in await resources_section(jobs, "/jobs/ml/seed")

            # A sample of the job's pod: the page shows it.
            usage = {"cpu": "250m", "memory": "64Mi"}
            cluster.answer(
                "GET",
                r"/apis/metrics\.k8s\.io/v1beta1/namespaces/ml/pods",
                200,
                {
                    "kind": "PodMetricsList",
                    "items": [
                        {
                            "metadata": {"name": "seed-worker-0", "namespace": "ml"},
                            "timestamp": "2026-12-05T10:00:00Z",
                            "containers": [{"name": "tensorflow", "usage": usage}],
                        }
                    ],
                },
            )
            report = await asyncio.to_thread(jobs.resources, "seed")
            [sample] = report.replicas["seed-worker-0"]
            assert (sample.cpu_cores, sample.memory_bytes) == (0.25, 64 * MiB)
            section = await resources_section(jobs, "/jobs/ml/seed")
            assert "0.25 cores, 64.0 MiB" in section and "<svg" in section

            # A cluster without it: discovery answers 404.
            cluster.answer(
                "GET",
                r"/apis/metrics\.k8s\.io/v1beta1$",
                404,
                status_body(404, "NotFound", "the server could not find the requested resource"),
            )
            report = await asyncio.to_thread(jobs.resources, "seed")
            assert report.replicas == {} and report.note == NO_METRICS_API
            section = await resources_section(jobs, "/jobs/ml/seed")
            assert "This cluster has no metrics API" in section and "<svg" not in section
        finally:
            jobs.backend.close()  # type: ignore[attr-defined]
