"""The XGBoost framework: the tracker's env as training-operator v1 sets it, and its rules."""

from __future__ import annotations

from typing import Any

import pytest

from kubemill.api import ManifestError, RestartPolicy
from kubemill.engines.xgboost.api import XGBoostJob
from kubemill.frameworks import LABEL_JOB_ROLE, ReplicaPlan, decided_by
from kubemill.kinds import load_one, plan_for
from support.framework_networks import ClusterNetwork, LoopbackNetwork


def manifest(name: str = "xg", **replicas: int) -> dict[str, Any]:
    pod = {"spec": {"containers": [{"name": "xgboost", "image": "local"}]}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "XGBoostJob",
        "metadata": {"name": name},
        "spec": {
            "xgbReplicaSpecs": {t: {"replicas": n, "template": pod} for t, n in replicas.items()}
        },
    }


def xgbjob(**replicas: int) -> XGBoostJob:
    job = load_one(manifest(**replicas))
    assert isinstance(job, XGBoostJob)
    return job


def env_items(replica: ReplicaPlan) -> list[tuple[str, str | None]]:
    return [(e.name, e.value) for e in replica.env]


def expected(rank: int) -> list[tuple[str, str]]:
    return [
        ("MASTER_PORT", "9999"),
        ("MASTER_ADDR", "xg-master-0"),
        ("WORLD_SIZE", "3"),
        ("RANK", str(rank)),
        ("PYTHONUNBUFFERED", "0"),
        ("WORKER_PORT", "9999"),
        ("WORKER_ADDRS", "xg-worker-0,xg-worker-1"),
    ]


@pytest.mark.parametrize(
    ("replica", "rank"), [("xg-master-0", 0), ("xg-worker-0", 1), ("xg-worker-1", 2)]
)
def test_every_replica_gets_the_tracker_and_its_rank_in_upstreams_order(
    replica: str, rank: int
) -> None:
    job = xgbjob(Master=1, Worker=2)
    plan = plan_for(job, ClusterNetwork(job.name))
    assert env_items(plan.replica(replica)) == expected(rank)


def test_a_master_alone_gets_no_worker_variables() -> None:
    plan = plan_for(xgbjob(Master=1), ClusterNetwork("xg"))
    assert [name for name, _ in env_items(plan.replica("xg-master-0"))] == [
        "MASTER_PORT",
        "MASTER_ADDR",
        "WORLD_SIZE",
        "RANK",
        "PYTHONUNBUFFERED",
    ]


def test_locally_the_tracker_is_the_masters_reserved_loopback_port() -> None:
    loopback = LoopbackNetwork()
    plan = plan_for(xgbjob(Master=1, Worker=1), loopback)
    tracker = loopback.ports[("Master", 0, 9999)]
    for rep in plan.replicas:
        env = dict(env_items(rep))
        assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("127.0.0.1", str(tracker))
        assert env["WORKER_PORT"] == str(loopback.ports[("Worker", 0, 9999)])


def test_the_master_decides_and_is_labelled_so() -> None:
    job = xgbjob(Master=1, Worker=1)
    assert job.replica_specs["Worker"].restart_policy is RestartPolicy.NEVER
    plan = plan_for(job, ClusterNetwork("xg"))
    assert plan.outcome == decided_by("Master")
    assert {r.name: r.labels.get(LABEL_JOB_ROLE) for r in plan.replicas} == {
        "xg-master-0": "master",
        "xg-worker-0": None,
    }


@pytest.mark.parametrize(
    ("replicas", "path", "message"),
    [
        ({"Worker": 2}, "spec.xgbReplicaSpecs.Master", "a Master replica is required"),
        ({"Master": 2, "Worker": 1}, "spec.xgbReplicaSpecs.Master.replicas", "must be 1"),
    ],
)
def test_one_master_is_required(replicas: dict[str, int], path: str, message: str) -> None:
    with pytest.raises(ManifestError) as caught:
        load_one(manifest(**replicas))
    assert [(e.path, e.message) for e in caught.value.errors] == [(path, message)]
