"""The Trainer planner: a TrainJob through the torch-distributed runtime is numNodes replicas
whose trainer container carries torchrun's PET_* variables as upstream's torch plugin sets
them, and succeeds when every node does."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubemill.api import Condition, ConditionType, JobStatus, ReplicaStatus
from kubemill.engines.trainer.api import runtimes
from kubemill.engines.trainer.api.defaults import DEFAULT_RUNTIMES
from kubemill.engines.trainer.api.spec import ChildJobStatus
from kubemill.engines.trainer.api.trainjob import TrainJob
from kubemill.engines.trainer.framework import Trainer, jobs_status, num_proc_per_node
from kubemill.engines.trainer.local import run_locally
from kubemill.frameworks import LABEL_JOB_ROLE, PlanError, ReplicaPlan, SuccessPolicy
from kubemill.frameworks.plan import ObservedPodView, StatusView
from kubemill.kinds import load_one, plan_for
from support.framework_networks import ClusterNetwork, LoopbackNetwork


def trainjob(name: str = "tj", runtime: str = "torch-distributed", **trainer: Any) -> TrainJob:
    job = load_one(
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": name},
            "spec": {
                "runtimeRef": {"name": runtime},
                "trainer": {"image": "img", "command": ["torchrun", "train.py"], **trainer},
            },
        }
    )
    assert isinstance(job, TrainJob)
    return job


def env_items(replica: ReplicaPlan) -> list[tuple[str, str | None]]:
    return [(e.name, e.value) for e in replica.env]


def test_every_node_gets_torchruns_variables_on_kubernetes() -> None:
    job = trainjob(numNodes=3, numProcPerNode=2)
    plan = plan_for(job, ClusterNetwork("tj"))
    assert [r.name for r in plan.replicas] == ["tj-node-0", "tj-node-1", "tj-node-2"]
    for rank, replica in enumerate(plan.replicas):
        assert replica.container == "node"
        assert env_items(replica) == [
            ("PET_NNODES", "3"),
            ("PET_NPROC_PER_NODE", "2"),
            ("PET_NODE_RANK", str(rank)),
            ("PET_MASTER_ADDR", "tj-node-0"),
            ("PET_MASTER_PORT", "29500"),
        ]
        assert replica.ports == {"trainjob-port": 29500}
    assert plan.replicas[0].labels[LABEL_JOB_ROLE] == "master"
    assert LABEL_JOB_ROLE not in plan.replicas[1].labels
    assert plan.outcome == SuccessPolicy("node", "all")


def test_the_master_is_the_trainer_steps_first_replica_whatever_its_name() -> None:
    runtime = copy.deepcopy(DEFAULT_RUNTIMES[0])
    runtime["metadata"]["name"] = "launcher-trains"
    runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["name"] = "launcher"
    added = runtimes.add(runtime)
    try:
        job = load_one(
            {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "metadata": {"name": "tj"},
                "spec": {"runtimeRef": {"name": "launcher-trains"}, "trainer": {"numNodes": 2}},
            }
        )
        plan = plan_for(job, ClusterNetwork("tj"))
    finally:
        runtimes.remove(added)
    assert [r.name for r in plan.replicas] == ["tj-launcher-0", "tj-launcher-1"]
    assert dict(env_items(plan.replicas[1]))["PET_MASTER_ADDR"] == "tj-launcher-0"
    assert plan.outcome == SuccessPolicy("launcher", "all")


def test_a_job_depending_on_another_being_ready_starts_after_it() -> None:
    runtime = copy.deepcopy(DEFAULT_RUNTIMES[0])
    runtime["metadata"]["name"] = "with-launcher"
    runtime["spec"].pop("mlPolicy")  # a plain JobSet template: no policy's env
    runtime["spec"]["template"]["spec"]["replicatedJobs"].append(
        {
            "name": "launcher",
            "dependsOn": [{"name": "node", "status": "Ready"}],
            "template": {
                "spec": {"template": {"spec": {"containers": [{"name": "l", "image": "i"}]}}}
            },
        }
    )
    added = runtimes.add(runtime)
    try:
        job = load_one(
            {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "metadata": {"name": "tj"},
                "spec": {"runtimeRef": {"name": "with-launcher"}, "trainer": {"numNodes": 2}},
            }
        )
        plan = plan_for(job, ClusterNetwork("tj"))
    finally:
        runtimes.remove(added)
    assert [(r.name, r.stage, r.env) for r in plan.replicas] == [
        ("tj-node-0", 0, ()),
        ("tj-node-1", 0, ()),
        ("tj-launcher-0", 1, ()),
    ]
    assert plan.start_gate == "ready"
    assert plan.outcome == SuccessPolicy("node", "all")


def test_locally_the_master_is_node_0s_own_port() -> None:
    network = LoopbackNetwork()
    plan = plan_for(trainjob(numNodes=2), network)
    master_port = network.ports[("node", 0, 29500)]
    for replica in plan.replicas:
        env = dict(env_items(replica))
        assert (env["PET_MASTER_ADDR"], env["PET_MASTER_PORT"]) == ("127.0.0.1", str(master_port))
        assert env["PET_NPROC_PER_NODE"] == "auto"  # the runtime's default


@pytest.mark.parametrize(
    ("trainer", "expected"),
    [
        pytest.param({}, "auto", id="runtime-default"),
        pytest.param({"numProcPerNode": 4}, "4", id="number"),
        pytest.param(
            {"resourcesPerNode": {"limits": {"cpu": "3"}}}, "3", id="auto-counts-cpu-limits"
        ),
        pytest.param({"resourcesPerNode": {"limits": {"cpu": "1500m"}}}, "2", id="auto-rounds-up"),
        pytest.param(
            {
                "resourcesPerNode": {
                    "limits": {"cpu": "3", "nvidia.com/gpu": "1"},
                    "requests": {"cpu": "3", "nvidia.com/gpu": "1"},
                }
            },
            "auto",
            id="auto-with-gpu-stays",
        ),
        # Upstream's plugin reads the requests whenever the limits did not decide, and a
        # missing list counts as 1 process: so do we (a number, or auto with a GPU, with
        # limits but no requests, becomes 1).
        pytest.param(
            {"resourcesPerNode": {"limits": {"nvidia.com/gpu": "1"}}},
            "1",
            id="auto-with-gpu-limits-only",
        ),
        pytest.param(
            {"numProcPerNode": "cpu", "resourcesPerNode": {"requests": {"cpu": "2500m"}}},
            "3",
            id="cpu-from-requests",
        ),
        pytest.param({"resourcesPerNode": {}}, "1", id="no-lists-means-one"),
        pytest.param(
            {"numProcPerNode": 2, "resourcesPerNode": {"requests": {"cpu": "8"}}},
            "2",
            id="number-wins",
        ),
    ],
)
def test_processes_per_node_as_upstream_computes_them(
    trainer: dict[str, Any], expected: str
) -> None:
    assert num_proc_per_node(trainjob(**trainer)) == expected


def test_xgboost_nodes_get_the_collectives_variables() -> None:
    job = trainjob("xg", "xgboost-distributed", numNodes=3)
    plan = plan_for(job, ClusterNetwork("xg"))
    assert [r.name for r in plan.replicas] == ["xg-node-0", "xg-node-1", "xg-node-2"]
    for rank, replica in enumerate(plan.replicas):
        assert env_items(replica) == [
            ("DMLC_TRACKER_URI", "xg-node-0"),
            ("DMLC_TRACKER_PORT", "29500"),
            ("DMLC_TASK_ID", str(rank)),
            ("DMLC_NUM_WORKER", "3"),
        ]
        assert replica.ports == {"trainjob-port": 29500}
    assert plan.outcome == SuccessPolicy("node", "all")


@pytest.mark.parametrize(
    ("resources", "workers"),
    [
        pytest.param(None, "2", id="cpu-one-per-node"),
        pytest.param({"limits": {"nvidia.com/gpu": "4"}}, "8", id="gpus-in-limits"),
        pytest.param(
            {"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "4"}},
            "4",
            id="requests-first",
        ),
    ],
)
def test_xgboost_counts_a_worker_per_gpu(resources: Any, workers: str) -> None:
    extra = {"resourcesPerNode": resources} if resources is not None else {}
    job = trainjob("xg", "xgboost-distributed", numNodes=2, **extra)
    env = dict(env_items(plan_for(job, ClusterNetwork("xg")).replicas[0]))
    assert env["DMLC_NUM_WORKER"] == workers


def test_jax_nodes_get_the_coordinator_as_upstreams_jax_plugin_names_it() -> None:
    job = trainjob("jx", "jax-distributed", numNodes=2)
    plan = plan_for(job, ClusterNetwork("jx"))
    assert [r.name for r in plan.replicas] == ["jx-node-0", "jx-node-1"]
    for rank, replica in enumerate(plan.replicas):
        assert env_items(replica) == [
            ("JAX_NUM_PROCESSES", "2"),
            ("JAX_PROCESS_ID", str(rank)),
            ("JAX_COORDINATOR_ADDRESS", "jx-node-0:6666"),
            ("JAX_COORDINATOR_PORT", "6666"),
            ("JAX_DISTRIBUTED_BACKEND", "gloo"),
        ]
        assert replica.ports == {"trainjob-port": 6666}
    assert plan.outcome == SuccessPolicy("node", "all")


def test_locally_the_jax_coordinator_is_node_0s_own_port() -> None:
    network = LoopbackNetwork()
    plan = plan_for(trainjob("jx", "jax-distributed", numNodes=2), network)
    port = network.ports[("node", 0, 6666)]
    for replica in plan.replicas:
        env = dict(env_items(replica))
        assert env["JAX_COORDINATOR_ADDRESS"] == f"127.0.0.1:{port}"
        assert env["JAX_COORDINATOR_PORT"] == str(port)


def counted(view: StatusView) -> list[ChildJobStatus]:
    """What the status extension writes into ``status.jobsStatus``."""
    found = jobs_status(view)["jobs_status"]
    assert isinstance(found, list)
    return found


def test_jobs_status_counts_each_replicated_job() -> None:
    job = trainjob(numNodes=2)
    plan = plan_for(job, ClusterNetwork("tj"))

    def view(status: JobStatus, *ready: int) -> StatusView:
        pods = tuple(
            ObservedPodView(f"tj-node-{i}", "node", i, "Running", ready=i in ready)
            for i in range(2)
        )
        return StatusView(job=job, plan=plan, status=status, pods=pods)

    running = JobStatus(replica_statuses={"node": ReplicaStatus(active=2)})
    (one,) = counted(view(running, 0))
    assert one.to_wire() == {
        "name": "node",
        "active": 1,
        "ready": 0,
        "succeeded": 0,
        "failed": 0,
        "suspended": 0,
    }
    (both,) = counted(view(running, 0, 1))
    assert both.ready == 1
    done = JobStatus(replica_statuses={"node": ReplicaStatus(succeeded=2)})
    (finished,) = counted(view(done))
    assert (finished.active, finished.ready, finished.succeeded) == (0, 1, 1)
    suspended = JobStatus(conditions=[Condition(type=ConditionType.SUSPENDED)])
    (held,) = counted(view(suspended))
    assert (held.suspended, held.active) == (1, 0)


def test_the_framework_plans_trainjobs_only() -> None:
    other = load_one(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "x"},
            "spec": {
                "pytorchReplicaSpecs": {
                    "Master": {
                        "template": {"spec": {"containers": [{"name": "pytorch", "image": "i"}]}}
                    }
                }
            },
        }
    )
    with pytest.raises(PlanError, match="TrainJobs"):
        Trainer().plan(other, ClusterNetwork("x"))


def test_mpi_nodes_are_hosts_of_a_hostfile_the_launcher_reads_over_ssh() -> None:
    job = trainjob("mp", "mpi-distributed", numNodes=3, numProcPerNode=2)
    plan = plan_for(job, ClusterNetwork("mp"))
    assert [(r.name, r.stage) for r in plan.replicas] == [
        ("mp-trainer-node-0", 0),
        ("mp-trainer-node-1", 0),
        ("mp-trainer-node-2", 0),
        ("mp-launcher-0", 1),
    ]
    launcher = plan.replicas[-1]
    # The trainer's command went to the launcher (mpirun's), the nodes keep sshd.
    assert (launcher.container, launcher.host_only) == ("launcher", False)
    assert env_items(launcher) == [
        ("OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile"),
        ("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
        ("OMPI_MCA_orte_set_default_slots", "2"),
        ("OMPI_MCA_plm_rsh_args", "-o ConnectionAttempts=10"),
    ]
    assert all(env_items(r) == [] and not r.host_only for r in plan.replicas[:3])
    assert plan.outcome == SuccessPolicy("launcher", "all")
    assert plan.subdomain == "mp" and plan.services is False
    hostfile, keys = plan.files
    assert (hostfile.name, hostfile.mount_path, hostfile.replica_types) == (
        "mp-mpi-hostfile",
        "/etc/mpi",
        ("launcher",),
    )
    (content,) = (f.content for f in hostfile.files if f.name == "hostfile")
    hosts = [ClusterNetwork("mp").host_name("trainer-node", i, subdomain="mp") for i in range(3)]
    assert content == "".join(f"{host} slots=2\n" for host in hosts)
    assert (keys.name, keys.mount_path, keys.secret) == (
        "mp-mpi-ssh-auth",
        "/home/mpiuser/.ssh",
        True,
    )


def test_locally_an_mpi_trainjob_reaches_its_hosts_through_the_exec_agent() -> None:
    job = trainjob("mp", "mpi-distributed", numNodes=2)
    network = LoopbackNetwork()
    plan = run_locally(job, plan_for(job, network), network)
    nodes, launcher = plan.replicas[:2], plan.replicas[2]
    assert all(r.host_only for r in nodes) and not launcher.host_only
    env = dict(env_items(launcher))
    files = network.files_path("mp-mpi-hostfile", "/etc/mpi")
    assert env["OMPI_MCA_plm_rsh_agent"] == f"{files}/kubexec"
    assert env["OMPI_MCA_orte_set_default_slots"] == "1"  # the runtime's numProcPerNode
    assert "OMPI_MCA_plm_rsh_args" not in env
    (hostfile,) = plan.files
    assert [f.name for f in hostfile.files] == ["hostfile", "kubexec"]
    assert hostfile.replica_types == ("launcher", "trainer-node")


def test_with_run_launcher_as_node_the_launcher_is_a_host_too() -> None:
    runtime = copy.deepcopy(
        next(d for d in DEFAULT_RUNTIMES if d["metadata"]["name"] == "mpi-distributed")
    )
    runtime["metadata"]["name"] = "mpi-launcher-too"
    runtime["spec"]["mlPolicy"]["mpi"]["runLauncherAsNode"] = True
    added = runtimes.add(runtime)
    try:
        job = trainjob("mp", "mpi-launcher-too", numNodes=3)
        plan = plan_for(job, ClusterNetwork("mp"))
        # numNodes counts the launcher: two more hosts.
        assert [r.name for r in plan.replicas] == [
            "mp-trainer-node-0",
            "mp-trainer-node-1",
            "mp-launcher-0",
        ]
        (content,) = (f.content for f in plan.files[0].files if f.name == "hostfile")
        assert content.splitlines()[0].startswith(
            ClusterNetwork("mp").host_name("launcher", 0, subdomain="mp")
        )
        assert len(content.splitlines()) == 3
    finally:
        runtimes.remove(added)


def test_the_trainer_starts_once_the_initializers_it_depends_on_completed() -> None:
    runtime = copy.deepcopy(DEFAULT_RUNTIMES[0])
    runtime["metadata"]["name"] = "with-initializers"
    step = {"spec": {"template": {"spec": {"containers": [{"name": "s", "image": "i"}]}}}}
    jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    jobs[0]["dependsOn"] = [{"name": "model-initializer", "status": "Complete"}]
    jobs[0:0] = [
        {"name": "dataset-initializer", "template": step},
        {
            "name": "model-initializer",
            "dependsOn": [{"name": "dataset-initializer", "status": "Complete"}],
            "template": step,
        },
    ]
    added = runtimes.add(runtime)
    try:
        plan = plan_for(trainjob("ini", "with-initializers", numNodes=2), ClusterNetwork("ini"))
    finally:
        runtimes.remove(added)
    assert [(r.name, r.stage) for r in plan.replicas] == [
        ("ini-dataset-initializer-0", 0),
        ("ini-model-initializer-0", 1),
        ("ini-node-0", 2),
        ("ini-node-1", 2),
    ]
    assert plan.start_gate == "succeeded"
    assert plan.outcome == SuccessPolicy("node", "all")
