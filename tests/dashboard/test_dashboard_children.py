"""A job's children on its page: the pods its program created itself, as its engine's
record selects them (a Spark application's executors, labelled as Spark labels them), on
the Kubernetes substrate against the test API server; a kind without such has no panel."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from kubemill.dashboard.security import Guard
from kubemill.dashboard.server import build_app
from kubemill.engines.spark.framework.driver import application_id
from kubemill.engines.spark.framework.wire import LABEL_APP_SELECTOR, LABEL_ROLE
from kubemill.sdk import JobClient
from support import kmock_cluster
from support.kube_client_support import SEED_TFJOB, ClientClusterThread, Operator, running

pytestmark = pytest.mark.asyncio

SPARK_APP = """
apiVersion: sparkoperator.k8s.io/v1beta2
kind: SparkApplication
metadata: {name: pi}
spec:
  type: Python
  sparkVersion: "4.0.0"
  image: spark:4.0.0
  mainApplicationFile: local:///opt/spark/examples/src/main/python/pi.py
"""


def executor(name: str, app_id: str) -> dict[str, Any]:
    """A pod as a Spark driver creates an executor (only what selects it matters here)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {LABEL_APP_SELECTOR: app_id, LABEL_ROLE: "executor"},
        },
        "spec": {"containers": [{"name": "spark-kubernetes-executor", "image": "spark:4.0.0"}]},
    }


async def page_of(jobs: JobClient, path: str) -> str:
    async with TestClient(TestServer(build_app(jobs, guard=Guard()), host="127.0.0.1")) as web:
        return await (await web.get(path)).text()


async def test_a_spark_applications_executors_are_its_children(tmp_path: Path) -> None:
    with ClientClusterThread() as cluster:
        cluster.install_crds()
        kubeconfig = kmock_cluster.write_kubeconfig(tmp_path / "kubeconfig", cluster.url)
        jobs = JobClient("kubernetes", kubeconfig=str(kubeconfig), context="kmock")
        try:
            await asyncio.to_thread(jobs.submit, SPARK_APP)
            await asyncio.to_thread(jobs.submit, SEED_TFJOB)
            app = (await asyncio.to_thread(jobs.get, "pi")).job
            pods = "/api/v1/namespaces/default/pods"
            cluster.create(pods, executor("pi-exec-1", application_id(app)))
            cluster.create(pods, executor("other-exec-1", "spark-" + "0" * 32))
            await asyncio.to_thread(
                Operator(cluster).pod_status,
                "default",
                "pi-exec-1",
                running("spark-kubernetes-executor", ip="10.2.0.9"),
            )

            children = await asyncio.to_thread(jobs.children, "pi")
            assert children is not None and children.title == "Executors"
            assert [(p.name, p.phase, p.address) for p in children.pods] == [
                ("pi-exec-1", "Running", "10.2.0.9")
            ]
            page = await page_of(jobs, "/jobs/default/pi")
            section = page.split('data-section="children"')[1].split("</section>")[0]
            assert "<caption>Executors</caption>" in section
            assert 'data-child="pi-exec-1"' in section and "other-exec-1" not in section

            # A kind whose programs create no pods of their own has no such panel.
            assert await asyncio.to_thread(jobs.children, "seed") is None
            assert 'data-section="children"' not in await page_of(jobs, "/jobs/default/seed")
        finally:
            jobs.backend.close()  # type: ignore[attr-defined]


async def test_locally_the_page_says_what_the_executors_are(
    web: TestClient[Any, Any], jobs: JobClient, tmp_path: Path
) -> None:
    program = tmp_path / "pi.py"
    program.write_text("print('pi')\n")
    manifest = SPARK_APP.replace("local:///opt/spark/examples/src/main/python/pi.py", str(program))
    await asyncio.to_thread(jobs.submit, manifest + "  suspend: true\n", detach=True)
    children = await asyncio.to_thread(jobs.children, "pi")
    assert children is not None and children.pods == () and "threads of the driver" in children.note
    page = await (await web.get("/jobs/default/pi")).text()
    section = page.split('data-section="children"')[1].split("</section>")[0]
    assert "threads of the driver" in section
