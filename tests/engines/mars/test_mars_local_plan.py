"""A MarsCluster's Plan on the local substrate: supervisors then workers as replicas, every
address from the Network, readiness from the entrypoint's file, Ready judged by the core
with the endpoint written by the status extension."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kubemill.api import ConditionType, JobStatus
from kubemill.core import reconcile
from kubemill.core.model import CreatePod, Observed, ObservedPod
from kubemill.engines.mars.api import MarsCluster
from kubemill.engines.mars.framework import (
    ENV_READY_FILE,
    ENV_SERVICE_PORT,
    ENV_SPILL_DIRS,
    ENV_SUPERVISORS,
    ENV_WEB_PORT,
    SERVICE_PORT,
    WEB_PORT,
    Mars,
)
from kubemill.engines.mars.local import local_plan
from kubemill.frameworks.plan import Plan, ServicePolicy
from kubemill.kinds import load_one
from support.framework_networks import LoopbackNetwork

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def cluster(**spec: Any) -> MarsCluster:
    job = load_one(
        {
            "apiVersion": "kubemill.dev/v1",
            "kind": "MarsCluster",
            "metadata": {"name": "m", "namespace": "default", "uid": "u1"},
            "spec": {"workerCpu": 1, "workerMem": "1g", "supervisorMem": "1g", **spec},
        }
    )
    assert isinstance(job, MarsCluster)
    return job


def planned(job: MarsCluster) -> tuple[Plan, LoopbackNetwork]:
    network = LoopbackNetwork()
    return local_plan(job, Mars().plan(job, network), network), network


def env_of(plan: Plan, name: str) -> dict[str, str]:
    rep = next(r for r in plan.replicas if r.name == name)
    return {e.name: e.value or "" for e in rep.env}


def test_supervisors_start_first_then_workers_once_the_supervisors_are_ready() -> None:
    plan, _ = planned(cluster(supervisorNum=2, workerNum=3, minWorkerNum=2))
    assert [(r.name, r.stage) for r in plan.replicas] == [
        ("m-supervisor-0", 0),
        ("m-supervisor-1", 0),
        ("m-worker-0", 1),
        ("m-worker-1", 1),
        ("m-worker-2", 1),
    ]
    assert plan.start_gate == "ready"
    assert plan.service_cluster is None
    assert plan.outcome == ServicePolicy("Supervisor", 2, also_ready=(("Worker", 2),))
    assert {r.restart_policy.value for r in plan.replicas} == {"Always"}


def test_every_address_comes_from_the_network_and_every_replica_knows_the_supervisors() -> None:
    plan, network = planned(cluster(supervisorNum=2, workerNum=1))
    supervisors = [str(network.endpoint("Supervisor", i, SERVICE_PORT)) for i in range(2)]
    for rep in plan.replicas:
        env = env_of(plan, rep.name)
        own = network.endpoint(rep.replica_type, rep.index, SERVICE_PORT).port
        assert env[ENV_SERVICE_PORT] == str(own)
        assert env[ENV_SUPERVISORS] == ",".join(supervisors)
    web = network.endpoint("Supervisor", 1, WEB_PORT).port
    assert env_of(plan, "m-supervisor-1")[ENV_WEB_PORT] == str(web)
    assert ENV_WEB_PORT not in env_of(plan, "m-worker-0")
    assert len(set(network.ports.values())) == len(network.ports)


def test_readiness_is_the_entrypoints_file_of_the_replicas_own() -> None:
    plan, _ = planned(cluster(workerNum=2))
    files = set()
    for rep in plan.replicas:
        ready = env_of(plan, rep.name)[ENV_READY_FILE]
        assert ready.startswith("/tmp/job/files/")
        container = rep.template.spec.containers[0]
        assert container.readiness_probe is not None
        assert container.readiness_probe["exec"] == {"command": ["test", "-f", ready]}
        assert container.command == [
            "python",
            "-m",
            "kubemill.engines.mars.pod.entrypoint",
            rep.replica_type.lower(),
        ]
        files.add(ready)
    assert len(files) == 3


def test_no_volumes_locally_and_the_spill_paths_are_the_machines() -> None:
    plan, _ = planned(cluster(workerSpillPaths=["/data/a", "/data/b"], workerCacheMem="10%"))
    worker = next(r for r in plan.replicas if r.replica_type == "Worker")
    assert worker.template.spec.volumes is None
    container = worker.template.spec.containers[0]
    assert container.volume_mounts is None
    env = {e.name: e.value for e in container.env or []}
    assert env[ENV_SPILL_DIRS] == "/data/a:/data/b"


def _pod(name: str, rtype: str, index: int, *, ready: bool) -> ObservedPod:
    return ObservedPod(
        name=name, replica_type=rtype, index=index, phase="Running", ready=ready, started=NOW
    )


def test_the_core_judges_it_ready_with_the_endpoint_only_once_enough_replicas_are_ready() -> None:
    job = cluster(workerNum=2, minWorkerNum=1)
    plan, network = planned(job)
    first = reconcile(job, plan, Observed(), NOW)
    assert [a.name for a in first.actions if isinstance(a, CreatePod)] == ["m-supervisor-0"]
    job.status = first.status
    pods = [
        _pod("m-supervisor-0", "Supervisor", 0, ready=True),
        _pod("m-worker-0", "Worker", 0, ready=False),
        _pod("m-worker-1", "Worker", 1, ready=False),
    ]
    waiting = reconcile(job, plan, Observed(pods=tuple(pods)), NOW)
    status = waiting.status
    assert not isinstance(status, JobStatus) or status.condition(ConditionType.READY) is None
    assert getattr(status, "endpoint", "unset") is None
    job.status = status
    pods[2] = _pod("m-worker-1", "Worker", 1, ready=True)
    ready = reconcile(job, plan, Observed(pods=tuple(pods)), NOW).status
    condition = ready.condition(ConditionType.READY)
    assert condition is not None and condition.status == "True"
    assert "1 of 1 Supervisor" in condition.message and "1 of 1 Worker" in condition.message
    web = network.endpoint("Supervisor", 0, WEB_PORT).port
    assert getattr(ready, "endpoint", None) == f"http://127.0.0.1:{web}"
    assert getattr(ready, "ready_replicas", None) == {"Supervisor": 1, "Worker": 1}
    assert not ready.finished  # a service is never Succeeded


def test_a_stopped_cluster_has_no_endpoint() -> None:
    job = cluster()
    plan, _ = planned(job)
    job.status = reconcile(job, plan, Observed(), NOW).status
    pods = (
        _pod("m-supervisor-0", "Supervisor", 0, ready=True),
        _pod("m-worker-0", "Worker", 0, ready=True),
    )
    job.status = reconcile(job, plan, Observed(pods=pods), NOW).status
    assert getattr(job.status, "endpoint", None)
    job.metadata.annotations["kubemill.dev/stop"] = "test"
    stopped = reconcile(job, plan, Observed(pods=pods), NOW).status
    assert stopped.phase == "Failed"
    assert getattr(stopped, "endpoint", "unset") is None
