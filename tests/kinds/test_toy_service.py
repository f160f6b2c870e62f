"""A service cluster that only a plugin knows, on both substrates, with no edit in kubemill.

The toy service (``toy_service_engine.py``: web servers, Ready while they serve) is
registered through ``KUBEMILL_ENGINES`` only. Locally ``kubemill cluster create toyserve``
makes one (the registry lists it beside Mars), returns once it is Ready with an endpoint that
really serves, ``cluster list`` shows it and ``cluster stop`` leaves nothing serving. Under
the real operator, against the strict test API server, the engine's service-cluster
lifecycle creates its Deployment and NodePort Service and reports it Ready at the node's
address once the test (playing the Deployment controller and the kubelet) has a server up.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from toy_service_engine import build_objects, cluster_manifest
from typer.testing import CliRunner

from kubemill.api import ClusterOptions
from kubemill.cli.app import app
from kubemill.kinds import load_one, service_engines
from kubemill.sdk import JobClient
from support.operator_support import (
    Cluster,
    condition,
    is_true,
    job_path,
    replica_set,
    running_cluster,
    running_operator,
    start_pod,
)
from support.waiting import eventually

ENDPOINT = re.compile(r"is ready at (http://127\.0\.0\.1:\d+)")
HOST_IP = "10.1.0.9"
NODE_PORT = 30211


def fetch(url: str) -> int:
    with urllib.request.urlopen(url, timeout=5) as answer:
        status: int = answer.status
        return status


def serves(url: str) -> bool:
    try:
        return fetch(url) == 200
    except (urllib.error.URLError, OSError):
        return False


def test_the_registry_lists_the_plugins_service_engine(toy_service_plugin: None) -> None:
    engines = service_engines()
    assert {"mars", "toyserve"} <= set(engines)
    assert engines["toyserve"].kind == "ToyServe"


def test_cluster_create_makes_a_plugin_service_that_serves_and_stop_ends_it(
    toy_service_plugin: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBEMILL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("KUBEMILL_SUBSTRATE", raising=False)
    monkeypatch.delenv("KUBEMILL_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    unknown = runner.invoke(app, ["cluster", "create", "nosuch"])
    assert unknown.exit_code != 0
    assert "'mars'" in unknown.output and "'toyserve'" in unknown.output

    created = runner.invoke(
        app, ["cluster", "create", "toyserve", "--workers", "2", "--name", "web", "--timeout", "90"]
    )
    try:
        assert created.exit_code == 0, created.output
        found = ENDPOINT.search(created.output)
        assert found is not None, created.output
        endpoint = found.group(1)
        assert fetch(endpoint) == 200  # the first server answers, for real

        listed = runner.invoke(app, ["cluster", "list"])
        assert listed.exit_code == 0, listed.output
        assert re.search(r"web\s+ToyServe\s+Ready", listed.output), listed.output
        assert endpoint in listed.output
        view = JobClient("local", state_dir=tmp_path / "state").get("web")
        assert view.status.ready_replicas == {"Server": 2}  # type: ignore[attr-defined]
    finally:
        stopped = runner.invoke(app, ["cluster", "stop", "web"])
    assert stopped.exit_code == 0, stopped.output
    assert "ToyServe web stopped and deleted" in stopped.output
    assert not serves(endpoint)
    assert JobClient("local", state_dir=tmp_path / "state").list() == []


@pytest.fixture
def cluster(toy_service_plugin: None) -> Iterator[Cluster]:
    with running_cluster() as served:  # installs every registered kind's CRD, the toy's too
        yield served


def start_server(cluster: Cluster, namespace: str, deployment: dict[str, Any], index: int) -> str:
    """A pod of the Deployment's ReplicaSet, as its controllers would make it, on a node."""
    owner = replica_set(cluster, namespace, deployment, suffix=f"7c4b{index}")
    return start_pod(cluster, namespace, owner, index)


def report_ready(cluster: Cluster, namespace: str, pod: str) -> None:
    status = {
        "phase": "Running",
        "hostIP": HOST_IP,
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [
            {
                "name": "server",
                "ready": True,
                "restartCount": 0,
                "image": "python",
                "imageID": "",
                "state": {"running": {}},
            }
        ],
    }
    cluster.patch(f"/api/v1/namespaces/{namespace}/pods/{pod}/status", {"status": status})


def test_the_operator_runs_the_plugin_service_cluster(cluster: Cluster, tmp_path: Path) -> None:
    namespace = cluster.namespace()
    apps = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    services = f"/api/v1/namespaces/{namespace}/services"
    manifest = cluster_manifest("w", ClusterOptions(workers=2, min_workers=1))
    with running_operator(cluster, tmp_path, "--all-namespaces"):
        path = job_path("ToyServe", namespace, "w")
        created = cluster.create(job_path("ToyServe", namespace), manifest)
        deployment = eventually(lambda: cluster.get_or_none(f"{apps}/w-server"), what="servers")
        web = eventually(lambda: cluster.get_or_none(f"{services}/w-web"), what="the web service")
        # The framework's objects, owned by the ToyServe.
        expected = build_objects(load_one({**manifest, "metadata": {"name": "w"}}))  # type: ignore[arg-type]
        assert deployment["spec"]["template"] == expected[0]["spec"]["template"]
        assert deployment["spec"]["replicas"] == 2
        for body in (deployment, web):
            owners = body["metadata"]["ownerReferences"]
            assert [(o["kind"], o["uid"]) for o in owners] == [
                ("ToyServe", created["metadata"]["uid"])
            ]
        waiting = eventually(
            lambda: (job := cluster.get(path)) and condition(job, "Ready") and job,
            what="Ready False",
        )
        assert "0 of 1 Server" in condition(waiting, "Ready")["message"]

        report_ready(cluster, namespace, start_server(cluster, namespace, deployment, 0))
        web["spec"]["ports"][0]["nodePort"] = NODE_PORT  # the API server's allocator
        cluster.patch(f"{services}/w-web", {"spec": {"ports": web["spec"]["ports"]}})
        ready = eventually(
            lambda: (job := cluster.get(path)) and is_true(job, "Ready") and job, what="Ready"
        )
        assert ready["status"]["endpoint"] == f"http://{HOST_IP}:{NODE_PORT}"
        assert ready["status"]["readyReplicas"] == {"Server": 1}
        assert not is_true(ready, "Succeeded")
