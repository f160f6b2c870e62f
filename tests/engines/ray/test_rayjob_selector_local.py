"""A real RayJob on an existing local Ray cluster (``clusterSelector``), through the CLI:
``kubemill cluster create ray`` starts the cluster, then ``kubemill run`` of a RayJob that
selects it submits to that cluster's head (with the cluster's own token) and Succeeds as
Ray says, its remote task run on the cluster's worker; the cluster is still Ready after
the RayJob ended, and nothing is left once it is stopped. Without the cluster (no Ray
needed) the RayJob waits, Initializing, saying which cluster it waits for."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.e2e_support import Cli, processes_with_token
from support.engines import skip_without
from support.waiting import eventually

START = 300.0
"""Seconds for a cluster to be Ready (two `ray start`s on a busy 2-core machine)."""
ENTRYPOINT = (
    'python -c "import ray; ray.init(); '
    "answer = ray.get(ray.remote(num_cpus=1)(lambda: 41 + 1).remote()); "
    'assert answer == 42, answer; print(answer)"'
)


def _rayjob(name: str, cluster: str) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name},
        "spec": {
            "entrypoint": ENTRYPOINT,
            "clusterSelector": {"ray.io/cluster": cluster},
            "shutdownAfterJobFinishes": True,
        },
    }


def _written(tmp_path: Path, manifest: dict[str, Any]) -> Path:
    path = tmp_path / "rayjob.yaml"
    path.write_text(yaml.safe_dump(manifest), encoding="utf-8")
    return path


def _status(cli: Cli, name: str) -> dict[str, Any]:
    done = cli("get", "-o", "json", name)
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)["status"]
    assert isinstance(status, dict)
    return status


@pytest.mark.engine
def test_a_rayjob_runs_on_the_cluster_it_selects_and_leaves_it_running(
    cli: Cli, tmp_path: Path
) -> None:
    skip_without("ray", "ray")
    created = cli("cluster", "create", "ray", "--workers", "1", "--name", "shared", timeout=START)
    assert created.returncode == 0, created.stdout + created.stderr
    manifest = _rayjob("on-shared", "shared")
    path = _written(tmp_path, manifest)
    try:
        done = cli.run(path)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr
        assert "RayJob on-shared Succeeded" in done.stdout
        status = _status(cli, "on-shared")
        assert status["jobStatus"] == "SUCCEEDED"
        assert status["jobDeploymentStatus"] == "Complete"
        assert status["rayClusterName"] == "shared"
        cluster = _status(cli, "shared")
        assert status["dashboardURL"] == cluster["endpoint"].removeprefix("http://")
        # The RayJob never stops the cluster it selected: still Ready, its nodes running.
        assert cluster["state"] == "ready"
        assert cluster["readyReplicas"] == {"Head": 1, "workers": 1}
    finally:
        stopped = cli("cluster", "stop", "shared", timeout=120)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert not processes_with_token(cli.token)


def test_without_its_cluster_a_rayjob_waits_saying_for_which(cli: Cli, tmp_path: Path) -> None:
    submitted = cli("run", "-d", str(_written(tmp_path, _rayjob("waits", "nowhere"))))
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    status = eventually(
        lambda: (s := _status(cli, "waits")).get("message") and s, what="a waiting message"
    )
    assert status["jobDeploymentStatus"] == "Initializing"
    assert status["message"].startswith("waiting for RayCluster nowhere: it does not exist")
    assert status["rayClusterName"] == "nowhere"
    assert not status.get("jobStatus")
    assert cli("delete", "waits").returncode == 0
    assert not processes_with_token(cli.token)
