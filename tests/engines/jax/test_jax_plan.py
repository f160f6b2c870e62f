"""The JAX framework: the coordinator env as training-operator v1 sets it, and its rules."""

from __future__ import annotations

from typing import Any

import pytest

from kubemill.api import ManifestError, RestartPolicy
from kubemill.engines.jax.api import JAXJob
from kubemill.frameworks import LABEL_JOB_ROLE, ReplicaPlan, SuccessPolicy
from kubemill.kinds import load_one, plan_for
from support.framework_networks import ClusterNetwork, LoopbackNetwork


def jaxjob(name: str = "jx", workers: int = 2, **worker: Any) -> JAXJob:
    """A kubeflow.org/v1 JAXJob of ``workers`` Workers (``worker`` adds to the replica spec)."""
    container = {"name": "jax", "image": "local"}
    spec = {"replicas": workers, "template": {"spec": {"containers": [container]}}, **worker}
    job = load_one(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "JAXJob",
            "metadata": {"name": name},
            "spec": {"jaxReplicaSpecs": {"worker": spec}},
        }
    )
    assert isinstance(job, JAXJob)
    return job


def env_items(replica: ReplicaPlan) -> list[tuple[str, str | None]]:
    return [(e.name, e.value) for e in replica.env]


@pytest.mark.parametrize("index", [0, 1, 2])
def test_every_worker_gets_the_coordinator_in_upstreams_order(index: int) -> None:
    job = jaxjob(workers=3)
    plan = plan_for(job, ClusterNetwork(job.name))
    assert env_items(plan.replica(f"jx-worker-{index}")) == [
        ("PYTHONUNBUFFERED", "1"),
        ("COORDINATOR_PORT", "6666"),
        ("COORDINATOR_ADDRESS", "jx-worker-0"),
        ("NUM_PROCESSES", "3"),
        ("PROCESS_ID", str(index)),
    ]


def test_defaults_are_upstreams() -> None:
    job = jaxjob()
    spec = job.replica_specs["Worker"]
    assert spec.restart_policy is RestartPolicy.NEVER
    ports = spec.template.spec.containers[0].ports or []
    assert [(p.name, p.container_port) for p in ports] == [("jaxjob-port", 6666)]
    assert job.run_policy.clean_pod_policy is not None
    assert job.run_policy.clean_pod_policy.value == "None"


def test_the_coordinator_port_follows_worker_zeros_port_and_locally_is_its_own() -> None:
    ports = [{"name": "jaxjob-port", "containerPort": 1234}]
    job = jaxjob(template={"spec": {"containers": [{"name": "jax", "image": "l", "ports": ports}]}})
    cluster = plan_for(job, ClusterNetwork(job.name))
    assert dict(env_items(cluster.replica("jx-worker-1")))["COORDINATOR_PORT"] == "1234"
    loopback = LoopbackNetwork()
    local = plan_for(job, loopback)
    reserved = loopback.ports[("Worker", 0, 1234)]
    for rep in local.replicas:
        env = dict(env_items(rep))
        assert (env["COORDINATOR_ADDRESS"], env["COORDINATOR_PORT"]) == ("127.0.0.1", str(reserved))


def test_every_worker_must_succeed_and_worker_zero_is_labelled_the_master() -> None:
    plan = plan_for(jaxjob(), ClusterNetwork("jx"))
    assert plan.outcome == SuccessPolicy("Worker", "all")
    roles = {rep.name: rep.labels.get(LABEL_JOB_ROLE) for rep in plan.replicas}
    assert roles == {"jx-worker-0": "master", "jx-worker-1": None}


def test_only_workers_and_a_jax_container() -> None:
    bad = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "JAXJob",
        "metadata": {"name": "jx"},
        "spec": {
            "jaxReplicaSpecs": {
                "Master": {"template": {"spec": {"containers": [{"name": "jax", "image": "l"}]}}},
                "Worker": {"template": {"spec": {"containers": [{"name": "main", "image": "l"}]}}},
            }
        },
    }
    with pytest.raises(ManifestError) as caught:
        load_one(bad)
    paths = {e.path for e in caught.value.errors}
    assert paths == {
        "spec.jaxReplicaSpecs.Master",
        "spec.jaxReplicaSpecs.Worker.template.spec.containers",
    }
