"""A controller that only a plugin knows, on both substrates, with no edit in kubemill.

The toy controller (``toy_controller_engine.py``: a ToyFanout keeps N runs of the toy
replica-set kind) is registered through ``KUBEMILL_ENGINES`` only, after the toy engine
whose jobs it creates. Locally its detached loop submits the runs as local jobs (which really
run and get Ready), makes a run deleted by hand again, and deleting the controller deletes
its runs.
Under the real operator, against the strict test API server, the same rules create the runs
owned by it, the operator then runs each run as any job, and a scale-down deletes one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from toy_controller_engine import manifest

from kubemill.api import ConditionType
from kubemill.kinds import is_controller, load_one
from kubemill.sdk import JobClient
from kubemill.substrates.kubernetes.install import operator_rules, permits
from kubemill.substrates.kubernetes.render import render_job
from support.operator_support import (
    Cluster,
    is_true,
    job_path,
    running_cluster,
    running_operator,
)
from support.waiting import eventually

SERVE = "import time\nwhile True:\n    time.sleep(1)\n"


def template(command: list[str]) -> dict[str, Any]:
    """One Head and one Member (a ToyCluster's spec), Ready once the Member runs."""
    pod = {"spec": {"containers": [{"name": "toy", "image": "python", "command": command}]}}
    return {
        "greeting": "from the fanout",
        "minMembers": 1,
        "toyReplicaSpecs": {
            "Head": {"replicas": 1, "template": pod},
            "Member": {"replicas": 1, "template": pod},
        },
    }


def fanout(name: str, runs: int, command: list[str]) -> dict[str, Any]:
    return manifest(name, runs=runs, template=template(command))


def test_the_plugin_controller_is_registered_rendered_and_granted(
    toy_controller_plugin: None,
) -> None:
    assert is_controller("ToyFanout") and not is_controller("ToyCluster")
    rules = operator_rules()
    assert permits(rules, group="kubemill.dev", resource="toyfanouts/status", verb="patch")
    assert permits(rules, group="kubemill.dev", resource="toyclusters", verb="create")
    objects = render_job(load_one(fanout("r", 2, ["toy"])))
    runs = [o["metadata"]["name"] for o in objects if o["kind"] == "ToyCluster"]
    assert runs == ["r-0", "r-1"]
    assert ("Pod", "r-0-head-0") in [(o["kind"], o["metadata"]["name"]) for o in objects]


def test_the_plugin_controller_runs_locally(toy_controller_plugin: None, tmp_path: Path) -> None:
    client = JobClient("local", state_dir=tmp_path / "state")
    client.submit(fanout("f", 2, ["python", "-c", SERVE]), detach=True, base_dir=tmp_path)
    try:

        def runs() -> dict[str, Any]:
            return {v.name: v for v in client.list() if v.kind == "ToyCluster"}

        eventually(lambda: set(runs()) == {"f-0", "f-1"}, what="the two runs")
        for name in ("f-0", "f-1"):
            view = runs()[name]
            owner = view.job.metadata.owner_references[0]  # type: ignore[index]
            assert (owner.kind, owner.name, owner.controller) == ("ToyFanout", "f", True)
            eventually(
                lambda name=name: client.get(name).status.is_true(ConditionType.READY),
                what=f"{name} Ready: its replicas run",
            )
        counted = eventually(
            lambda: (v := client.get("f")).status.is_true(ConditionType.RUNNING) and v,
            what="the fanout Running",
        )
        assert counted.status.active_runs == 2  # type: ignore[attr-defined]

        # A run deleted by hand is made again: the loop keeps two.
        first = runs()["f-1"].job.metadata.uid
        client.delete("f-1")
        eventually(
            lambda: "f-1" in (now := runs()) and now["f-1"].job.metadata.uid != first,
            what="f-1 made again",
        )
    finally:
        client.delete("f")
    assert client.list() == []


@pytest.fixture
def cluster(toy_controller_plugin: None) -> Iterator[Cluster]:
    with running_cluster() as served:  # installs every registered kind's CRD, the toys' too
        yield served


def test_the_operator_runs_the_plugin_controller(cluster: Cluster, tmp_path: Path) -> None:
    namespace = cluster.namespace()
    runs_path = job_path("ToyCluster", namespace)
    with running_operator(cluster, tmp_path, "--all-namespaces"):
        path = job_path("ToyFanout", namespace, "f")
        created = cluster.create(job_path("ToyFanout", namespace), fanout("f", 2, ["toy"]))

        def runs() -> dict[str, dict[str, Any]]:
            return {r["metadata"]["name"]: r for r in cluster.list(runs_path)}

        eventually(lambda: set(runs()) == {"f-0", "f-1"}, what="the two runs")
        for run in runs().values():
            owners = run["metadata"]["ownerReferences"]
            assert [(o["kind"], o["uid"], o["controller"]) for o in owners] == [
                ("ToyFanout", created["metadata"]["uid"], True)
            ]
            assert run["metadata"]["labels"]["toy.kubemill.dev/fanout"] == "f"
        # Each run is a job the operator runs: its pods are created.
        pods = f"/api/v1/namespaces/{namespace}/pods"
        eventually(
            lambda: (
                {"f-0-head-0", "f-1-member-0"}
                <= {p["metadata"]["name"] for p in cluster.list(pods)}
            ),
            what="the runs' pods",
        )
        running = eventually(
            lambda: (job := cluster.get(path)) and is_true(job, "Running") and job,
            what="the fanout Running",
        )
        assert running["status"]["activeRuns"] == 2

        cluster.patch(path, {"spec": {"runs": 1}})
        eventually(lambda: set(runs()) == {"f-0"}, what="the scale-down")
