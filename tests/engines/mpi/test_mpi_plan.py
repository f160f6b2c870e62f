"""The MPI framework: hostfile, discovery script, launcher env, start order, access, keys."""

from __future__ import annotations

from typing import Any

import pytest

from kubemill.engines.mpi.api import MPIJob
from kubemill.engines.mpi.framework import MPI
from kubemill.frameworks import (
    ExposedService,
    FileSet,
    PackagedProgram,
    Plan,
    SshKeyPart,
    SuccessPolicy,
)
from kubemill.kinds import load_one
from support.framework_networks import ClusterNetwork, LoopbackNetwork

SEED_LAUNCHER = {
    "replicas": 1,
    "template": {
        "spec": {
            "containers": [
                {"name": "mpi-launcher", "image": "horovod", "command": ["mpirun", "-np", "2"]}
            ]
        }
    },
}


def worker(replicas: int = 2, command: list[str] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "mpi-worker", "image": "horovod"}
    if command is not None:
        container["command"] = command
    return {"replicas": replicas, "template": {"spec": {"containers": [container]}}}


def mpijob(
    api_version: str = "kubemill.dev/v1",
    *,
    name: str = "mj",
    annotations: dict[str, str] | None = None,
    workers: dict[str, Any] | None = None,
    **spec: Any,
) -> MPIJob:
    replica_specs: dict[str, Any] = {"Launcher": SEED_LAUNCHER}
    if workers is not None or "Worker" not in spec:
        replica_specs["Worker"] = workers if workers is not None else worker()
    metadata: dict[str, Any] = {"name": name, "namespace": "team"}
    if annotations:
        metadata["annotations"] = annotations
    job = load_one(
        {
            "apiVersion": api_version,
            "kind": "MPIJob",
            "metadata": metadata,
            "spec": {**spec, "mpiReplicaSpecs": replica_specs},
        }
    )
    assert isinstance(job, MPIJob)
    return job


def cluster_plan(job: MPIJob) -> Plan:
    return MPI().plan(job, ClusterNetwork(job.name, job.namespace))


def files(plan: Plan, name: str) -> FileSet:
    return next(s for s in plan.files if s.name == name)


def content(file_set: FileSet, name: str) -> str:
    return next(f.content for f in file_set.files if f.name == name)


def env_of(plan: Plan, replica: str) -> dict[str, str | None]:
    return {e.name: e.value for e in plan.replica(replica).env}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(
            {"slotsPerWorker": 2},
            "mj-worker-0.mj.team.svc slots=2\nmj-worker-1.mj.team.svc slots=2\n",
            id="openmpi",
        ),
        pytest.param(
            {"slotsPerWorker": 3, "mpiImplementation": "Intel"},
            "mj-worker-0.mj.team.svc:3\nmj-worker-1.mj.team.svc:3\n",
            id="intel",
        ),
        pytest.param(
            {"mpiImplementation": "MPICH"},
            "mj-worker-0.mj.team.svc:1\nmj-worker-1.mj.team.svc:1\n",
            id="mpich",
        ),
        pytest.param(
            {"runLauncherAsWorker": True},
            "mj-launcher-0.mj.team.svc slots=1\n"
            "mj-worker-0.mj.team.svc slots=1\nmj-worker-1.mj.team.svc slots=1\n",
            id="launcher-first",
        ),
    ],
)
def test_hostfile_lists_the_hosts_as_the_implementation_reads_them(
    spec: dict[str, Any], expected: str
) -> None:
    plan = cluster_plan(mpijob(**spec))
    assert content(files(plan, "mj-config"), "hostfile") == expected


def test_hosts_resolve_through_the_jobs_headless_service() -> None:
    plan = cluster_plan(mpijob())
    assert plan.subdomain == "mj"
    assert plan.exposed == (ExposedService("mj", replica_type="", type="Headless"),)
    assert not plan.services
    assert plan.replica("mj-worker-1").host == "mj-worker-1.mj.team.svc"


def test_discovery_script_lists_running_workers_with_their_slots() -> None:
    plan = cluster_plan(mpijob(slotsPerWorker=4))
    script = next(f for f in files(plan, "mj-config").files if f.name == "discover_hosts.sh")
    assert script.mode == 0o755
    assert script.listing is not None
    assert script.listing.replica_type == "Worker"
    assert script.listing.header == "#!/bin/sh"
    assert script.listing.line.format(host="h", index=0) == "echo h:4"


def test_workers_come_first_and_the_launcher_decides() -> None:
    plan = cluster_plan(mpijob())
    stages = {rep.name: rep.stage for rep in plan.replicas}
    assert stages == {"mj-launcher-0": 1, "mj-worker-0": 0, "mj-worker-1": 0}
    assert plan.outcome == SuccessPolicy("Launcher", "first")
    assert plan.start_gate == "running"
    assert cluster_plan(mpijob(launcherCreationPolicy="WaitForWorkersReady")).start_gate == "ready"


def test_exec_mode_delivers_the_agent_and_grants_exec_on_the_workers_only() -> None:
    plan = cluster_plan(mpijob())
    config = files(plan, "mj-config")
    agent = next(f for f in config.files if f.name == "kubexec")
    assert agent.source == PackagedProgram("kubemill.engines.mpi.agent")
    assert agent.mode == 0o755
    # The workers get the agent's path too: OpenMPI 4's orted stops where it is missing.
    assert config.replica_types == ("Launcher", "Worker")
    assert [s.name for s in plan.files] == ["mj-config"]  # no keys
    access = plan.access
    assert access is not None
    assert access.replica_types == ("Launcher",)
    exec_rules = [r for r in access.rules if "pods/exec" in r.resources]
    assert [(r.verbs, r.resource_names) for r in exec_rules] == [
        (("get", "create"), ("mj-worker-0", "mj-worker-1"))
    ]
    env = env_of(plan, "mj-launcher-0")
    assert env["OMPI_MCA_plm_rsh_agent"] == "/etc/mpi/kubexec"
    assert env["KUBEMILL_EXEC_CONTAINER"] == "mpi-worker"


def test_a_worker_without_a_command_only_hosts_in_exec_mode() -> None:
    seed_like = mpijob("kubeflow.org/v1alpha2", workers=worker(command=[""]))
    plan = cluster_plan(seed_like)
    assert [r.host_only for r in plan.replicas] == [False, True, True]
    commanded = cluster_plan(mpijob(workers=worker(command=["sleep", "60"])))
    assert not any(r.host_only for r in commanded.replicas)
    ssh = cluster_plan(mpijob(annotations={"kubemill.dev/remote-shell": "ssh"}))
    assert not any(r.host_only for r in ssh.replicas)  # the image runs sshd


def test_ssh_mode_generates_keys_into_an_ssh_auth_secret() -> None:
    plan = cluster_plan(mpijob("kubeflow.org/v2beta1", sshAuthMountPath="/home/mpi/.ssh"))
    assert plan.access is None
    keys = files(plan, "mj-ssh")
    assert keys.secret
    assert keys.secret_type == "kubernetes.io/ssh-auth"
    assert keys.mount_path == "/home/mpi/.ssh"
    assert keys.replica_types == ()  # every replica
    by_name = {f.name: f for f in keys.files}
    assert by_name["ssh-privatekey"].source == SshKeyPart("private")
    assert by_name["ssh-privatekey"].mounted_as == ("id_rsa",)
    assert by_name["ssh-privatekey"].mode == 0o600
    assert by_name["ssh-publickey"].mounted_as == ("id_rsa.pub", "authorized_keys")
    env = env_of(plan, "mj-launcher-0")
    assert "OMPI_MCA_plm_rsh_agent" not in env
    assert env["OMPI_MCA_plm_rsh_args"] == "-o ConnectionAttempts=10"
    assert "kubexec" not in {f.name for f in files(plan, "mj-config").files}


@pytest.mark.parametrize(
    ("spec", "annotations", "expected"),
    [
        pytest.param(
            {},
            None,
            {
                "K_MPI_JOB_ROLE": "launcher",
                "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
                "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
                "OMPI_MCA_orte_set_default_slots": "1",
                "OMPI_MCA_plm_rsh_agent": "/etc/mpi/kubexec",
                "OMPI_MCA_plm_rsh_no_tree_spawn": "true",
                "KUBEMILL_EXEC_CONTAINER": "mpi-worker",
            },
            id="openmpi-exec",
        ),
        pytest.param(
            {"mpiImplementation": "Intel"},
            None,
            {
                "K_MPI_JOB_ROLE": "launcher",
                "I_MPI_HYDRA_HOST_FILE": "/etc/mpi/hostfile",
                "I_MPI_HYDRA_BOOTSTRAP": "rsh",
                "I_MPI_HYDRA_BOOTSTRAP_EXEC": "/etc/mpi/kubexec",
                "KUBEMILL_EXEC_CONTAINER": "mpi-worker",
            },
            id="intel-exec",
        ),
        pytest.param(
            {"mpiImplementation": "Intel"},
            {"kubemill.dev/remote-shell": "ssh"},
            {
                "K_MPI_JOB_ROLE": "launcher",
                "I_MPI_HYDRA_HOST_FILE": "/etc/mpi/hostfile",
                "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS": "-o ConnectionAttempts=10",
            },
            id="intel-ssh",
        ),
        pytest.param(
            {"mpiImplementation": "MPICH"},
            None,
            {
                "K_MPI_JOB_ROLE": "launcher",
                "HYDRA_HOST_FILE": "/etc/mpi/hostfile",
                "HYDRA_LAUNCHER": "rsh",
                "HYDRA_LAUNCHER_EXEC": "/etc/mpi/kubexec",
                "KUBEMILL_EXEC_CONTAINER": "mpi-worker",
            },
            id="mpich-exec",
        ),
        pytest.param(
            {"mpiImplementation": "MPICH"},
            {"kubemill.dev/remote-shell": "ssh"},
            {
                "K_MPI_JOB_ROLE": "launcher",
                "HYDRA_HOST_FILE": "/etc/mpi/hostfile",
                "HYDRA_LAUNCH_EXTRA_ARGS": "-o ConnectionAttempts=10",
            },
            id="mpich-ssh",
        ),
    ],
)
def test_launcher_env_per_implementation(
    spec: dict[str, Any], annotations: dict[str, str] | None, expected: dict[str, str]
) -> None:
    plan = cluster_plan(mpijob(annotations=annotations, **spec))
    assert env_of(plan, "mj-launcher-0") == expected
    assert env_of(plan, "mj-worker-0") == {"K_MPI_JOB_ROLE": "worker"}


def test_local_paths_and_host_names() -> None:
    job = mpijob()
    plan = MPI().plan(job, LoopbackNetwork())
    assert content(files(plan, "mj-config"), "hostfile") == "worker-0 slots=1\nworker-1 slots=1\n"
    env = env_of(plan, "mj-launcher-0")
    assert env["OMPI_MCA_orte_default_hostfile"] == "/tmp/job/files/mj-config/hostfile"
    assert env["OMPI_MCA_plm_rsh_agent"] == "/tmp/job/files/mj-config/kubexec"
