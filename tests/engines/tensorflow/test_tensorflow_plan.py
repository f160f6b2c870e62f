"""The TensorFlow framework: TF_CONFIG as training-operator v1 writes it, seed-style vars."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kubemill.api import RestartPolicy
from kubemill.engines.tensorflow.api import TFJob
from kubemill.engines.tensorflow.framework import TensorFlow
from kubemill.frameworks import (
    LABEL_JOB_NAME,
    LABEL_JOB_ROLE,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    ReplicaPlan,
    SuccessPolicy,
)
from kubemill.kinds import load_one, plan_for
from support.framework_networks import ClusterNetwork, LoopbackNetwork


@pytest.fixture
def loopback() -> LoopbackNetwork:
    """A fresh local-style network (127.0.0.1, distinct ports)."""
    return LoopbackNetwork()


SEED = Path(__file__).parents[2] / "manifests" / "good" / "seed-tfjob-v1alpha1.yaml"


def tfjob(name: str = "tj", *, spec: dict[str, Any] | None = None, **replicas: Any) -> TFJob:
    """A kubeflow.org/v1 TFJob with ``Type=count`` or ``Type={replica spec}`` arguments."""
    specs: dict[str, Any] = {}
    for rtype, value in replicas.items():
        rspec = value if isinstance(value, dict) else {"replicas": value}
        rspec.setdefault(
            "template",
            {"spec": {"containers": [{"name": "tensorflow", "image": "local"}]}},
        )
        specs[rtype] = rspec
    job = load_one(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {**(spec or {}), "tfReplicaSpecs": specs},
        }
    )
    assert isinstance(job, TFJob)
    return job


def env_of(replica: ReplicaPlan) -> dict[str, str | None]:
    names = [e.name for e in replica.env]
    assert len(names) == len(set(names)), f"duplicate env names: {names}"
    return {e.name: e.value for e in replica.env}


def tf_config(replica: ReplicaPlan) -> dict[str, Any]:
    value = env_of(replica)["TF_CONFIG"]
    assert value is not None
    parsed: dict[str, Any] = json.loads(value)
    return parsed


def addr(job: str, rtype: str, index: int, port: int = 2222) -> str:
    return f"{job}-{rtype}-{index}.ml.svc:{port}"


CHIEF_PS_WORKERS = {
    "chief": [addr("tj", "chief", 0)],
    "ps": [addr("tj", "ps", 0), addr("tj", "ps", 1)],
    "worker": [addr("tj", "worker", 0), addr("tj", "worker", 1)],
}


@pytest.mark.parametrize(
    ("job", "replica", "expected"),
    [
        pytest.param(
            tfjob(Chief=1, PS=2, Worker=2),
            "tj-chief-0",
            {
                "TF_CONFIG": json.dumps(
                    {
                        "cluster": CHIEF_PS_WORKERS,
                        "task": {"type": "chief", "index": 0},
                        "environment": "cloud",
                    },
                    separators=(",", ":"),
                ),
                "TF_PS_HOSTS": f"{addr('tj', 'ps', 0)},{addr('tj', 'ps', 1)}",
                "TF_WORKER_HOSTS": f"{addr('tj', 'worker', 0)},{addr('tj', 'worker', 1)}",
                "TF_JOB_NAME": "chief",
                "TF_TASK_INDEX": "0",
            },
            id="chief-ps-workers:chief",
        ),
        pytest.param(
            tfjob(Chief=1, PS=2, Worker=2),
            "tj-ps-1",
            {
                "TF_CONFIG": json.dumps(
                    {
                        "cluster": CHIEF_PS_WORKERS,
                        "task": {"type": "ps", "index": 1},
                        "environment": "cloud",
                    },
                    separators=(",", ":"),
                ),
                "TF_PS_HOSTS": f"{addr('tj', 'ps', 0)},{addr('tj', 'ps', 1)}",
                "TF_WORKER_HOSTS": f"{addr('tj', 'worker', 0)},{addr('tj', 'worker', 1)}",
                "TF_JOB_NAME": "ps",
                "TF_TASK_INDEX": "1",
            },
            id="chief-ps-workers:ps-1",
        ),
        pytest.param(
            tfjob(Worker=3),
            "tj-worker-2",
            {
                "TF_CONFIG": (
                    '{"cluster":{"worker":["tj-worker-0.ml.svc:2222","tj-worker-1.ml.svc:2222",'
                    '"tj-worker-2.ml.svc:2222"]},"task":{"type":"worker","index":2},'
                    '"environment":"cloud"}'
                ),
                "TF_PS_HOSTS": "",
                "TF_WORKER_HOSTS": (
                    "tj-worker-0.ml.svc:2222,tj-worker-1.ml.svc:2222,tj-worker-2.ml.svc:2222"
                ),
                "TF_JOB_NAME": "worker",
                "TF_TASK_INDEX": "2",
            },
            id="workers-only",
        ),
        pytest.param(
            tfjob(Worker=1),
            "tj-worker-0",
            {
                # Not distributed: upstream sets no TF_CONFIG; the seed-style variables
                # are still there so `$(TF_...)` in args expands.
                "TF_PS_HOSTS": "",
                "TF_WORKER_HOSTS": "tj-worker-0.ml.svc:2222",
                "TF_JOB_NAME": "worker",
                "TF_TASK_INDEX": "0",
            },
            id="single-replica",
        ),
        pytest.param(
            tfjob(Master=1, Worker=1, Evaluator=1),
            "tj-evaluator-0",
            {
                # The evaluator is not part of the training cluster but knows it.
                "TF_CONFIG": (
                    '{"cluster":{"master":["tj-master-0.ml.svc:2222"],'
                    '"worker":["tj-worker-0.ml.svc:2222"]},'
                    '"task":{"type":"evaluator","index":0},"environment":"cloud"}'
                ),
                "TF_PS_HOSTS": "",
                "TF_WORKER_HOSTS": "tj-worker-0.ml.svc:2222",
                "TF_JOB_NAME": "evaluator",
                "TF_TASK_INDEX": "0",
            },
            id="master-worker-evaluator",
        ),
        pytest.param(
            tfjob(
                PS={
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "tensorflow",
                                    "image": "local",
                                    "ports": [{"name": "tfjob-port", "containerPort": 3333}],
                                }
                            ]
                        }
                    },
                },
                Worker=1,
            ),
            "tj-worker-0",
            {
                "TF_CONFIG": (
                    '{"cluster":{"ps":["tj-ps-0.ml.svc:3333"],'
                    '"worker":["tj-worker-0.ml.svc:2222"]},'
                    '"task":{"type":"worker","index":0},"environment":"cloud"}'
                ),
                "TF_PS_HOSTS": "tj-ps-0.ml.svc:3333",
                "TF_WORKER_HOSTS": "tj-worker-0.ml.svc:2222",
                "TF_JOB_NAME": "worker",
                "TF_TASK_INDEX": "0",
            },
            id="per-type-port",
        ),
    ],
)
def test_exact_environment(job: TFJob, replica: str, expected: dict[str, str]) -> None:
    plan = plan_for(job, ClusterNetwork(job.name, job.namespace))
    assert env_of(plan.replica(replica)) == expected


def test_replicas_are_listed_in_type_order_then_index() -> None:
    # Keys in the manifest in another order, lowercase: the plan order does not follow them.
    job = tfjob(worker=2, evaluator=1, ps=2, chief=1)
    plan = plan_for(job, ClusterNetwork(job.name, job.namespace))
    assert [r.name for r in plan.replicas] == [
        "tj-chief-0",
        "tj-ps-0",
        "tj-ps-1",
        "tj-worker-0",
        "tj-worker-1",
        "tj-evaluator-0",
    ]
    assert [(r.replica_type, r.index) for r in plan.replicas][:3] == [
        ("Chief", 0),
        ("PS", 0),
        ("PS", 1),
    ]


def test_replica_plan_fields() -> None:
    job = tfjob(
        PS={"replicas": 1, "restartPolicy": "OnFailure"},
        Worker=2,
    )
    plan = plan_for(job, ClusterNetwork(job.name, job.namespace))
    assert (plan.kind, plan.name, plan.namespace) == ("TFJob", "tj", "ml")
    ps, worker = plan.replica("tj-ps-0"), plan.replica("tj-worker-1")
    assert ps.restart_policy is RestartPolicy.ON_FAILURE
    assert worker.restart_policy is RestartPolicy.NEVER  # TFJob's default
    assert worker.container == "tensorflow"
    assert worker.ports == {"tfjob-port": 2222}
    assert worker.template is job.replica_specs["Worker"].template
    assert worker.labels == {
        LABEL_JOB_NAME: "tj",
        LABEL_REPLICA_TYPE: "worker",
        LABEL_REPLICA_INDEX: "1",
    }
    assert [r.stage for r in plan.replicas] == [0, 0, 0]


@pytest.mark.parametrize(
    ("job", "masters"),
    [
        pytest.param(tfjob(Chief=1, Worker=2), ["tj-chief-0"], id="chief"),
        pytest.param(tfjob(Master=1, PS=1, Worker=1), ["tj-master-0"], id="master"),
        pytest.param(tfjob(PS=1, Worker=2), ["tj-worker-0"], id="no-chief:worker-0"),
    ],
)
def test_job_role_master_label(job: TFJob, masters: list[str]) -> None:
    plan = plan_for(job, ClusterNetwork(job.name))
    assert [r.name for r in plan.replicas if r.labels.get(LABEL_JOB_ROLE) == "master"] == masters


@pytest.mark.parametrize(
    ("job", "success"),
    [
        pytest.param(tfjob(Chief=1, Worker=2), SuccessPolicy("Chief", "first"), id="chief"),
        pytest.param(tfjob(Master=1, Worker=2), SuccessPolicy("Master", "first"), id="master"),
        pytest.param(
            tfjob(spec={"successPolicy": "AllWorkers"}, Chief=1, Worker=2),
            SuccessPolicy("Chief", "first"),
            id="chief-wins-over-all-workers",
        ),
        pytest.param(tfjob(PS=1, Worker=2), SuccessPolicy("Worker", "first"), id="worker-0"),
        pytest.param(
            tfjob(spec={"successPolicy": "AllWorkers"}, PS=1, Worker=2),
            SuccessPolicy("Worker", "all"),
            id="all-workers",
        ),
    ],
)
def test_success_policy(job: TFJob, success: SuccessPolicy) -> None:
    assert plan_for(job, ClusterNetwork(job.name)).outcome == success


def test_zero_replicas_of_a_type_gives_an_empty_cluster_entry() -> None:
    job = tfjob(PS=0, Worker=2)
    plan = plan_for(job, ClusterNetwork(job.name, job.namespace))
    assert [r.name for r in plan.replicas] == ["tj-worker-0", "tj-worker-1"]
    assert tf_config(plan.replicas[0])["cluster"] == {
        "ps": [],
        "worker": [addr("tj", "worker", 0), addr("tj", "worker", 1)],
    }


def test_seed_v1alpha1_job_plans_with_master_as_chief() -> None:
    job = load_one(SEED.read_text(encoding="utf-8"), name=str(SEED))
    plan = plan_for(job, ClusterNetwork(job.name))
    assert [r.name for r in plan.replicas] == [
        "example-job-chief-0",
        "example-job-ps-0",
        "example-job-ps-1",
        "example-job-worker-0",
    ]
    # The seed puts restartPolicy: OnFailure in the pod template; it becomes the replica's.
    assert {r.restart_policy for r in plan.replicas} == {RestartPolicy.ON_FAILURE}
    assert plan.outcome == SuccessPolicy("Chief", "first")
    config = tf_config(plan.replica("example-job-worker-0"))
    assert config == {
        "cluster": {
            "chief": ["example-job-chief-0.default.svc:2222"],
            "ps": ["example-job-ps-0.default.svc:2222", "example-job-ps-1.default.svc:2222"],
            "worker": ["example-job-worker-0.default.svc:2222"],
        },
        "task": {"type": "worker", "index": 0},
        "environment": "cloud",
    }


def test_loopback_network_gives_every_replica_a_distinct_reachable_address(
    loopback: LoopbackNetwork,
) -> None:
    job = tfjob(Chief=1, PS=2, Worker=3, Evaluator=1)
    plan = plan_for(job, loopback)
    configs = {r.name: tf_config(r) for r in plan.replicas}
    cluster = configs["tj-chief-0"]["cluster"]
    assert set(cluster) == {"chief", "ps", "worker"}
    everyone = [a for addresses in cluster.values() for a in addresses]
    assert len(everyone) == len(set(everyone)) == 6
    assert all(a.startswith("127.0.0.1:") for a in everyone)
    for replica in plan.replicas:
        config = configs[replica.name]
        # Every replica sees the same cluster and finds itself in it at its own index.
        assert config["cluster"] == cluster
        assert config["task"] == {"type": replica.replica_type.lower(), "index": replica.index}
        assert config["environment"] == "cloud"
        if replica.replica_type != "Evaluator":
            own = loopback.endpoint(replica.replica_type, replica.index, 2222)
            assert cluster[replica.replica_type.lower()][replica.index] == str(own)
    env = env_of(plan.replica("tj-worker-2"))
    assert env["TF_WORKER_HOSTS"] == ",".join(cluster["worker"])
    assert env["TF_PS_HOSTS"] == ",".join(cluster["ps"])


def test_framework_refuses_another_kind() -> None:
    job = load_one(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "pt"},
            "spec": {
                "pytorchReplicaSpecs": {
                    "Master": {
                        "template": {"spec": {"containers": [{"name": "pytorch", "image": "x"}]}}
                    }
                }
            },
        }
    )
    with pytest.raises(ValueError, match="plans TFJobs, not PyTorchJob"):
        TensorFlow().plan(job, ClusterNetwork("pt"))
