"""The PyTorch framework: MASTER_*/WORLD_SIZE/RANK and PET_* as training-operator v1 sets them."""

from __future__ import annotations

from typing import Any

import pytest

from kubemill.api import RestartPolicy
from kubemill.engines.pytorch.api import PyTorchJob
from kubemill.engines.pytorch.framework import PyTorch
from kubemill.frameworks import LABEL_JOB_ROLE, ReplicaPlan, SuccessPolicy
from kubemill.kinds import load_one, plan_for
from support.framework_networks import ClusterNetwork, LoopbackNetwork


@pytest.fixture
def loopback() -> LoopbackNetwork:
    """A fresh local-style network (127.0.0.1, distinct ports)."""
    return LoopbackNetwork()


def ptjob(name: str = "pt", *, spec: dict[str, Any] | None = None, **replicas: Any) -> PyTorchJob:
    """A kubeflow.org/v1 PyTorchJob with ``Type=count`` or ``Type={replica spec}`` arguments."""
    specs: dict[str, Any] = {}
    for rtype, value in replicas.items():
        rspec = value if isinstance(value, dict) else {"replicas": value}
        rspec.setdefault(
            "template", {"spec": {"containers": [{"name": "pytorch", "image": "local"}]}}
        )
        specs[rtype] = rspec
    job = load_one(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": name},
            "spec": {**(spec or {}), "pytorchReplicaSpecs": specs},
        }
    )
    assert isinstance(job, PyTorchJob)
    return job


def env_items(replica: ReplicaPlan) -> list[tuple[str, str | None]]:
    return [(e.name, e.value) for e in replica.env]


def master_env(rank: int, *, world: int = 3, nproc: str = "auto", nnodes: str = "3") -> list[Any]:
    return [
        ("PYTHONUNBUFFERED", "1"),
        ("MASTER_PORT", "23456"),
        ("PET_MASTER_PORT", "23456"),
        ("MASTER_ADDR", "pt-master-0"),
        ("PET_MASTER_ADDR", "pt-master-0"),
        ("WORLD_SIZE", str(world)),
        ("RANK", str(rank)),
        ("PET_NPROC_PER_NODE", nproc),
        ("PET_NODE_RANK", str(rank)),
        ("PET_NNODES", nnodes),
    ]


@pytest.mark.parametrize(
    ("job", "replica", "expected"),
    [
        pytest.param(ptjob(Master=1, Worker=2), "pt-master-0", master_env(0), id="master"),
        pytest.param(ptjob(Master=1, Worker=2), "pt-worker-0", master_env(1), id="worker-0"),
        pytest.param(ptjob(Master=1, Worker=2), "pt-worker-1", master_env(2), id="worker-1"),
        pytest.param(
            ptjob(spec={"nprocPerNode": 2}, Master=1, Worker=2),
            "pt-worker-1",
            master_env(2, world=6, nproc="2"),
            id="nproc-per-node-multiplies-world-size",
        ),
        pytest.param(
            ptjob(spec={"nprocPerNode": "gpu"}, Master=1, Worker=1),
            "pt-worker-0",
            master_env(1, world=2, nproc="gpu", nnodes="2"),
            id="nproc-not-a-number-counts-one",
        ),
        pytest.param(
            ptjob(Master=1),
            "pt-master-0",
            master_env(0, world=1, nnodes="1"),
            id="master-only",
        ),
        pytest.param(
            ptjob(
                spec={
                    "elasticPolicy": {
                        "minReplicas": 1,
                        "maxReplicas": 3,
                        "rdzvId": "run-7",
                        "maxRestarts": 5,
                        "rdzvConf": [
                            {"key": "join_timeout", "value": "60"},
                            {"key": "last_call_timeout", "value": "5"},
                        ],
                    }
                },
                Worker=2,
            ),
            "pt-worker-1",
            [
                ("PYTHONUNBUFFERED", "1"),
                ("PET_RDZV_ENDPOINT", "pt-worker-0:23456"),
                ("PET_RDZV_BACKEND", "c10d"),
                ("PET_NNODES", "1:3"),
                ("PET_MAX_RESTARTS", "5"),
                ("PET_NPROC_PER_NODE", "auto"),
                ("PET_RDZV_ID", "run-7"),
                ("PET_RDZV_CONF", "join_timeout=60,last_call_timeout=5"),
            ],
            id="elastic-workers-only",
        ),
        pytest.param(
            ptjob(spec={"elasticPolicy": {"rdzvBackend": "etcd-v2"}}, Worker=3),
            "pt-worker-0",
            [
                ("PYTHONUNBUFFERED", "1"),
                ("PET_RDZV_ENDPOINT", "pt-worker-0:23456"),
                ("PET_RDZV_BACKEND", "etcd-v2"),
                # No bounds given: both are the worker count, as upstream defaults them.
                ("PET_NNODES", "3:3"),
                ("PET_NPROC_PER_NODE", "auto"),
            ],
            id="elastic-default-bounds",
        ),
        pytest.param(
            ptjob(
                spec={
                    "elasticPolicy": {
                        "maxReplicas": 4,
                        "rdzvHost": "etcd.infra",
                        "rdzvPort": 2379,
                        "nProcPerNode": 2,
                        "standalone": True,
                    }
                },
                # Only maxReplicas: minReplicas takes its value, as upstream defaults it.
                Worker=4,
            ),
            "pt-worker-0",
            [
                ("PYTHONUNBUFFERED", "1"),
                ("PET_RDZV_ENDPOINT", "etcd.infra:2379"),
                ("PET_RDZV_BACKEND", "c10d"),
                ("PET_NNODES", "4:4"),
                ("PET_NPROC_PER_NODE", "2"),
                ("PET_STANDALONE", ""),
            ],
            id="elastic-rdzv-host-port",
        ),
        pytest.param(
            ptjob(spec={"elasticPolicy": {"minReplicas": 1, "maxReplicas": 2}}, Master=1, Worker=1),
            "pt-worker-0",
            [
                ("PYTHONUNBUFFERED", "1"),
                ("MASTER_PORT", "23456"),
                ("PET_MASTER_PORT", "23456"),
                ("MASTER_ADDR", "pt-master-0"),
                ("PET_MASTER_ADDR", "pt-master-0"),
                ("WORLD_SIZE", "2"),
                ("RANK", "1"),
                ("PET_NPROC_PER_NODE", "auto"),
                ("PET_NODE_RANK", "1"),
                ("PET_RDZV_ENDPOINT", "pt-worker-0:23456"),
                ("PET_RDZV_BACKEND", "c10d"),
                ("PET_NNODES", "1:2"),
            ],
            id="elastic-with-master",
        ),
    ],
)
def test_exact_environment(job: PyTorchJob, replica: str, expected: list[Any]) -> None:
    plan = plan_for(job, ClusterNetwork(job.name, job.namespace))
    assert env_items(plan.replica(replica)) == expected


def test_master_port_follows_the_masters_pytorchjob_port() -> None:
    custom = {
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "pytorch",
                        "image": "local",
                        "ports": [{"name": "pytorchjob-port", "containerPort": 29500}],
                    }
                ]
            }
        }
    }
    job = ptjob(Master=custom, Worker=1)
    plan = plan_for(job, ClusterNetwork(job.name))
    env = dict(env_items(plan.replica("pt-worker-0")))
    assert env["MASTER_PORT"] == env["PET_MASTER_PORT"] == "29500"
    assert plan.replica("pt-master-0").ports == {"pytorchjob-port": 29500}


def test_loopback_network_addresses_the_master(loopback: LoopbackNetwork) -> None:
    job = ptjob(Master=1, Worker=2)
    plan = plan_for(job, loopback)
    master = loopback.endpoint("Master", 0, 23456)
    assert master.port != 23456  # the network mapped it, and the env must follow
    for replica in plan.replicas:
        env = dict(env_items(replica))
        assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == "127.0.0.1"
        assert env["MASTER_PORT"] == env["PET_MASTER_PORT"] == str(master.port)
    ranks = sorted(int(dict(env_items(r))["RANK"] or "-1") for r in plan.replicas)
    assert ranks == [0, 1, 2]


def test_replicas_labels_and_restart_policy() -> None:
    job = ptjob(Worker={"replicas": 2, "restartPolicy": "ExitCode"}, Master=1)
    plan = plan_for(job, ClusterNetwork(job.name))
    assert [r.name for r in plan.replicas] == ["pt-master-0", "pt-worker-0", "pt-worker-1"]
    assert [r.labels.get(LABEL_JOB_ROLE) for r in plan.replicas] == ["master", None, None]
    assert plan.replica("pt-master-0").restart_policy is RestartPolicy.ON_FAILURE
    assert plan.replica("pt-worker-1").restart_policy is RestartPolicy.EXIT_CODE
    assert {r.container for r in plan.replicas} == {"pytorch"}


@pytest.mark.parametrize(
    ("job", "success"),
    [
        pytest.param(ptjob(Master=1, Worker=2), SuccessPolicy("Master", "first"), id="master"),
        pytest.param(
            ptjob(spec={"elasticPolicy": {"minReplicas": 1, "maxReplicas": 2}}, Worker=2),
            SuccessPolicy("Worker", "any"),
            id="elastic",
        ),
        pytest.param(
            ptjob(spec={"elasticPolicy": {"minReplicas": 1, "maxReplicas": 2}}, Master=1, Worker=1),
            SuccessPolicy("Master", "first"),
            id="elastic-with-master",
        ),
    ],
)
def test_success_policy(job: PyTorchJob, success: SuccessPolicy) -> None:
    assert plan_for(job, ClusterNetwork(job.name)).outcome == success


def test_framework_refuses_another_kind() -> None:
    job = load_one(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "metadata": {"name": "tj"},
            "spec": {
                "tfReplicaSpecs": {
                    "Worker": {
                        "template": {"spec": {"containers": [{"name": "tensorflow", "image": "x"}]}}
                    }
                }
            },
        }
    )
    with pytest.raises(ValueError, match="plans PyTorchJobs, not TFJob"):
        PyTorch().plan(job, ClusterNetwork("tj"))
