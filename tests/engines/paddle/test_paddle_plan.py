"""The Paddle framework: PADDLE_* as training-operator v1 sets them, its rules, and what a
replica needs on one machine."""

from __future__ import annotations

from typing import Any

import pytest

from kubemill.api import ManifestError, RestartPolicy
from kubemill.engines.paddle.api import PaddleJob
from kubemill.frameworks import ReplicaPlan, SuccessPolicy
from kubemill.kinds import engine_for, load_one, plan_for
from support.framework_networks import ClusterNetwork, LoopbackNetwork


def manifest(name: str = "pd", env: list[Any] | None = None, **replicas: int) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "paddle", "image": "local"}
    if env:
        container["env"] = env
    pod = {"spec": {"containers": [container]}}
    specs = {t: {"replicas": n, "template": pod} for t, n in replicas.items()}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PaddleJob",
        "metadata": {"name": name},
        "spec": {"paddleReplicaSpecs": specs},
    }


def paddlejob(**replicas: Any) -> PaddleJob:
    job = load_one(manifest(**replicas))
    assert isinstance(job, PaddleJob)
    return job


def env_items(replica: ReplicaPlan) -> list[tuple[str, Any]]:
    return [
        (e.name, e.value if e.value_from is None else e.value_from.to_wire()) for e in replica.env
    ]


POD_IP = ("POD_IP_DUMMY", {"fieldRef": {"fieldPath": "status.podIP"}})


def test_collective_workers_meet_at_worker_zero_which_serves_on_its_pod_ip() -> None:
    plan = plan_for(paddlejob(Worker=2), ClusterNetwork("pd"))
    common = [("PYTHONUNBUFFERED", "0"), ("PADDLE_JOB_ID", "pd"), ("PADDLE_NNODES", "2")]
    assert env_items(plan.replica("pd-worker-0")) == [
        *common,
        POD_IP,
        ("PADDLE_MASTER", "$(POD_IP_DUMMY):36543"),
    ]
    assert env_items(plan.replica("pd-worker-1")) == [
        *common,
        ("PADDLE_MASTER", "pd-worker-0:36543"),
    ]
    assert plan.outcome == SuccessPolicy("Worker", "all")


def test_parameter_server_mode_meets_at_master_zero_and_counts_one_server_or_trainer() -> None:
    plan = plan_for(paddlejob(Master=2, Worker=1), ClusterNetwork("pd"))
    common = [("PYTHONUNBUFFERED", "0"), ("PADDLE_JOB_ID", "pd"), ("PADDLE_NNODES", "3")]
    assert env_items(plan.replica("pd-master-0")) == [
        *common,
        POD_IP,
        ("PADDLE_MASTER", "$(POD_IP_DUMMY):36543"),
        ("PADDLE_SERVER_NUM", "1"),
    ]
    assert env_items(plan.replica("pd-master-1")) == [
        *common,
        ("PADDLE_MASTER", "pd-master-0:36543"),
        ("PADDLE_SERVER_NUM", "1"),
    ]
    # Worker 0 is no rendezvous master when there is a Master.
    assert env_items(plan.replica("pd-worker-0")) == [
        *common,
        ("PADDLE_MASTER", "pd-master-0:36543"),
        ("PADDLE_TRAINER_NUM", "1"),
    ]
    assert plan.outcome == SuccessPolicy("Master", "all")


def test_defaults_are_upstreams() -> None:
    spec = paddlejob(Worker=1).replica_specs["Worker"]
    assert spec.restart_policy is RestartPolicy.ON_FAILURE
    ports = spec.template.spec.containers[0].ports or []
    assert [(p.name, p.container_port) for p in ports] == [("master", 36543)]


def test_elastic_policy_is_refused_at_its_path() -> None:
    text = manifest(Worker=2)
    text["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 3}
    with pytest.raises(ManifestError) as caught:
        load_one(text)
    [error] = caught.value.errors
    assert error.path == "spec.elasticPolicy"
    assert "remove elasticPolicy" in error.hint


def local_plan(job: PaddleJob, network: LoopbackNetwork) -> Any:
    plan = plan_for(job, network)
    return engine_for(job.KIND).local.planned(job, plan, network)


def test_locally_each_replica_gets_the_loopback_address_and_a_log_directory_of_its_own() -> None:
    loopback = LoopbackNetwork()
    plan = local_plan(paddlejob(Worker=2), loopback)
    port = loopback.ports[("Worker", 0, 36543)]
    first, second = (dict(env_items(rep)) for rep in plan.replicas)
    # The pod IP the rendezvous master serves on is the Network's address, as a value.
    assert (first["POD_IP_DUMMY"], first["PADDLE_MASTER"]) == (
        "127.0.0.1",
        f"$(POD_IP_DUMMY):{port}",
    )
    assert second["PADDLE_MASTER"] == f"127.0.0.1:{port}"
    assert (first["POD_IP"], first["PADDLE_LOG_DIR"]) == ("127.0.0.1", "log/pd-worker-0")
    assert (second["POD_IP"], second["PADDLE_LOG_DIR"]) == ("127.0.0.1", "log/pd-worker-1")


def test_locally_a_variable_the_container_sets_is_left_to_it() -> None:
    job = load_one(manifest(Worker=1, env=[{"name": "PADDLE_LOG_DIR", "value": "/tmp/mine"}]))
    assert isinstance(job, PaddleJob)
    [rep] = local_plan(job, LoopbackNetwork()).replicas
    names = [name for name, _ in env_items(rep)]
    assert "PADDLE_LOG_DIR" not in names and "POD_IP" in names
