"""Kubeflow Trainer v2: a TrainJob and its resolved runtime become a Plan of replicas.

Each replicated job of the runtime is one replica type (``node``, ...), with as many
replicas as it has pods (the trainer step: ``numNodes``); the TrainJob's trainer values are
applied by the model (:attr:`~.api.trainjob.TrainJob.replica_specs`). Upstream's torch
plugin (``pkg/runtime/framework/plugins/torch``) then gives the trainer container of every
node torchrun's variables, which this planner sets the same way:

- ``PET_NNODES``: the number of nodes;
- ``PET_NPROC_PER_NODE``: the trainer's ``numProcPerNode``, else the policy's, else
  ``auto``; with ``resourcesPerNode``, ``auto`` becomes the CPU count of the limits (or
  requests) when no GPU is asked for and ``cpu`` the CPU count, as upstream computes it
  (at least 1, rounded up); as upstream's plugin, whenever the limits do not decide, the
  requests do, and a list not given counts as 1 process (so ``numProcPerNode: 2`` with
  limits but no requests becomes 1: upstream's behaviour, kept so that both agree);
- ``PET_NODE_RANK``: the node's index (upstream reads it from the Job's completion index);
- ``PET_MASTER_ADDR`` and ``PET_MASTER_PORT``: node 0's short address and its trainer port
  (29500), as the substrate's network maps them (upstream's ``<job>-node-0-0.<job>``;
  kubemill's ``<job>-node-0`` on Kubernetes, 127.0.0.1 and a port of the job's own locally).

Upstream's xgboost plugin gives them XGBoost's collective (Rabit) variables instead:
``DMLC_TRACKER_URI`` and ``DMLC_TRACKER_PORT`` (node 0's address and trainer port: the
tracker runs there), ``DMLC_TASK_ID`` (the node's index) and ``DMLC_NUM_WORKER`` (nodes
times the GPUs each asks for, or times 1 on CPUs). Upstream's jax plugin gives them JAX's
distributed runtime's: ``JAX_NUM_PROCESSES`` (the nodes: one process each),
``JAX_PROCESS_ID`` (the node's index), ``JAX_COORDINATOR_ADDRESS`` (node 0's short address
and its coordinator port, ``host:port``), ``JAX_COORDINATOR_PORT`` and
``JAX_DISTRIBUTED_BACKEND`` (``gloo``: CPU collectives). A runtime without an ML policy runs its
template as it is. A replicated job that ``dependsOn`` another being Ready starts once that
one's replicas are Running and ready, or with ``Complete`` once they all succeeded (an
initializer before the trainer); one rule per runtime.

The job succeeds when every replica of the trainer step succeeds (the JobSet's success
policy's target, when the runtime names one), as a JobSet with its default success policy
does; any replica failing for good fails it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from decimal import ROUND_CEILING, Decimal
from typing import Any

from kubemill.api import ConditionType, Container, EnvVar, Job
from kubemill.core.quantity import parse_quantity
from kubemill.engines.trainer.api.spec import ChildJobStatus
from kubemill.engines.trainer.api.steps import start_gate
from kubemill.engines.trainer.api.trainjob import LAUNCHER, POLICY_PORTS, TrainJob, start_stages
from kubemill.frameworks import mpi_launch
from kubemill.frameworks._common import PlanError, ReplicaSlot, build_replicas, env
from kubemill.frameworks.jax_env import JaxProcess, coordinator
from kubemill.frameworks.plan import (
    ExposedService,
    FilePlan,
    FileSet,
    Network,
    Plan,
    StatusView,
    SuccessPolicy,
)

DEFAULT_NUM_PROC = "auto"


def num_proc_per_node(job: TrainJob) -> str:
    """``PET_NPROC_PER_NODE`` as upstream's torch plugin computes it."""
    runtime = job.runtime
    policy = runtime.spec.ml_policy if runtime is not None else None
    torch = policy.torch if policy is not None else None
    value = (torch.num_proc_per_node if torch is not None else None) or DEFAULT_NUM_PROC
    trainer = job.spec.trainer
    if trainer is not None and trainer.num_proc_per_node is not None:
        value = trainer.num_proc_per_node
    if trainer is None or trainer.resources_per_node is None:
        return value
    resources = trainer.resources_per_node
    if value == "auto":
        fallback = "auto"

        def use_cpu(found: dict[str, Any]) -> bool:
            return not any("gpu" in name.lower() for name in found)
    elif value == "cpu":
        fallback = "1"

        def use_cpu(found: dict[str, Any]) -> bool:
            return "cpu" in found
    else:
        fallback = value

        def use_cpu(found: dict[str, Any]) -> bool:
            return False

    counted, used = _from_resources(fallback, resources.get("limits"), use_cpu)
    if not used:
        counted, _ = _from_resources(fallback, resources.get("requests"), use_cpu)
    return counted


def _from_resources(
    fallback: str, found: Any, use_cpu: Callable[[dict[str, Any]], bool]
) -> tuple[str, bool]:
    """(processes, whether the CPU count decided) from one resource list, as upstream: no
    list at all gives 1."""
    if found is None:
        return "1", False
    if not isinstance(found, dict):
        return fallback, False
    if use_cpu(found):
        cpu = parse_quantity(found.get("cpu", 0)) or Decimal(0)
        cores = int(cpu.to_integral_value(rounding=ROUND_CEILING))
        return str(max(1, cores)), True
    return fallback, False


def trainer_port(job: TrainJob, container: Container) -> int:
    """The trainer container's port its policy's plugin gives it (29500 for torch and
    xgboost, JAX's coordinator port for jax), as the model declared it."""
    wanted = POLICY_PORTS[job.framework or ""]
    for port in container.ports or []:
        if port.container_port == wanted:
            return port.container_port
    raise PlanError(f"TrainJob {job.name}: the trainer container has no port {wanted}")


def torch_env(
    job: TrainJob, network: Network, slot: ReplicaSlot, port: int, container: Container
) -> list[EnvVar]:
    """torchrun's PET_* variables for one node."""
    master = network.endpoint(slot.replica_type, 0, port, qualified=False)
    return [
        env("PET_NNODES", str(job.num_nodes)),
        env("PET_NPROC_PER_NODE", num_proc_per_node(job)),
        env("PET_NODE_RANK", str(slot.index)),
        env("PET_MASTER_ADDR", master.host),
        env("PET_MASTER_PORT", str(master.port)),
    ]


def gpus_per_node(container: Container) -> int:
    """The GPUs a node's trainer container asks for, as upstream counts them: the first
    resource whose name says ``gpu``, in the requests, else in the limits (0 if none)."""
    resources = container.resources or {}

    def counted(found: Any) -> int:
        if not isinstance(found, dict):
            return 0
        for name, quantity in found.items():
            if "gpu" in name.lower():
                value = parse_quantity(quantity) or Decimal(0)
                return int(value.to_integral_value(rounding=ROUND_CEILING))
        return 0

    return counted(resources.get("requests")) or counted(resources.get("limits"))


def xgboost_env(
    job: TrainJob, network: Network, slot: ReplicaSlot, port: int, container: Container
) -> list[EnvVar]:
    """XGBoost's collective (Rabit) variables for one node: the tracker is node 0's, and
    every node runs a worker per GPU, or one on a CPU."""
    tracker = network.endpoint(slot.replica_type, 0, port, qualified=False)
    workers = job.num_nodes * (gpus_per_node(container) or 1)
    return [
        env("DMLC_TRACKER_URI", tracker.host),
        env("DMLC_TRACKER_PORT", str(tracker.port)),
        env("DMLC_TASK_ID", str(slot.index)),
        env("DMLC_NUM_WORKER", str(workers)),
    ]


JAX_ENV_NAMES = {
    "processes": "JAX_NUM_PROCESSES",
    "id": "JAX_PROCESS_ID",
    "address": "JAX_COORDINATOR_ADDRESS",
    "port": "JAX_COORDINATOR_PORT",
}
"""Upstream's jax plugin's names (the coordinator address with its port), in its order."""
JAX_BACKEND = "gloo"
"""The CPU collectives upstream's jax plugin names (``JAX_DISTRIBUTED_BACKEND``)."""


def jax_env(
    job: TrainJob, network: Network, slot: ReplicaSlot, port: int, container: Container
) -> list[EnvVar]:
    """JAX's distributed variables for one node: node 0 serves the coordinator, one JAX
    process per node."""
    process = JaxProcess(coordinator(network, slot.replica_type, port), job.num_nodes, slot.index)
    return [*process.env(JAX_ENV_NAMES), env("JAX_DISTRIBUTED_BACKEND", JAX_BACKEND)]


PolicyEnv = Callable[[TrainJob, Network, ReplicaSlot, int, Container], list[EnvVar]]
_POLICY_ENV: dict[str, PolicyEnv] = {"torch": torch_env, "xgboost": xgboost_env, "jax": jax_env}
"""The env each ML policy kubemill runs gives the trainer's nodes."""


def success_policy(job: TrainJob) -> SuccessPolicy:
    """Every replica of the success policy's target (the trainer step by default)."""
    runtime = job.runtime
    trainer_job = job.trainer_job()
    if runtime is None or trainer_job is None:
        raise PlanError(f"TrainJob {job.name}: its runtime is unknown or has no trainer step")
    policy = runtime.spec.template.spec.success_policy
    targets = policy.target_replicated_jobs if policy is not None else None
    target = targets[0] if targets else trainer_job.name
    return SuccessPolicy(
        target, "any" if policy is not None and policy.operator == "Any" else "all"
    )


def jobs_status(view: StatusView) -> Mapping[str, object]:
    """``status.jobsStatus``: per replicated job, its child Job counted as upstream's JobSet
    counts it (one Job per replicated job here): active while a pod runs, ready when every
    pod is ready or done, succeeded when every pod succeeded, failed when one failed for
    good, suspended while the TrainJob is."""
    suspended = view.status.is_true(ConditionType.SUSPENDED)
    out: list[ChildJobStatus] = []
    for rtype in dict.fromkeys(r.replica_type for r in view.plan.replicas):
        wanted = len(view.plan.of_type(rtype))
        counts = view.status.replica_statuses.get(rtype)
        active = counts.active if counts is not None else 0
        succeeded = counts.succeeded if counts is not None else 0
        failed = counts.failed if counts is not None else 0
        ready = sum(1 for pod in view.pods if pod.replica_type == rtype and pod.ready)
        out.append(
            ChildJobStatus(
                name=rtype,
                active=1 if active else 0,
                ready=1 if wanted and ready + succeeded >= wanted else 0,
                succeeded=1 if wanted and succeeded >= wanted else 0,
                failed=1 if failed else 0,
                suspended=1 if suspended else 0,
            )
        )
    return {"jobs_status": out}


MPI_HOSTFILE_SUFFIX = "-mpi-hostfile"
MPI_SSH_SUFFIX = "-mpi-ssh-auth"
MPI_HOSTFILE_DIR = "/etc/mpi"
DEFAULT_SSH_AUTH_MOUNT_PATH = "/root/.ssh"
"""Where upstream's mpi policy mounts the keys when the runtime names no place."""


def mpi_slots(job: TrainJob) -> int:
    """Slots per host: the trainer's ``numProcPerNode``, else the policy's, else 1."""
    trainer = job.spec.trainer
    if trainer is not None and trainer.num_proc_per_node and trainer.num_proc_per_node.isdigit():
        return int(trainer.num_proc_per_node)
    runtime = job.runtime
    policy = runtime.spec.ml_policy if runtime is not None else None
    mpi = policy.mpi if policy is not None else None
    return (mpi.num_proc_per_node if mpi is not None else None) or 1


def mpi_plan(job: TrainJob, network: Network, *, exec_mode: bool) -> Plan:
    """A TrainJob of the mpi policy: the hosts (the nodes' replicated job, and the launcher
    with ``runLauncherAsNode``) in ConfigMap ``<job>-mpi-hostfile``'s hostfile, mounted at
    /etc/mpi in the launcher, which starts once they run and decides (the runtime's success
    policy); OpenMPI's variables on the launcher's trainer container. mpirun reaches the
    hosts over ssh with a key pair of the job's (Secret ``<job>-mpi-ssh-auth`` at the
    policy's ``sshAuthMountPath`` everywhere), as upstream's plugin, or with ``exec_mode``
    (the local substrate: no sshd) through kubemill's exec agent, the hosts only hosting."""
    runtime, nodes_job = job.runtime, job.mpi_nodes_job()
    policy = runtime.spec.ml_policy if runtime is not None else None
    mpi = policy.mpi if policy is not None else None
    if runtime is None or nodes_job is None or mpi is None or LAUNCHER not in job.replica_specs:
        raise PlanError(f"TrainJob {job.name}: its mpi runtime needs a launcher and hosts")
    nodes = nodes_job.name
    slots = mpi_slots(job)
    implementation = mpi.mpi_implementation or mpi_launch.OPENMPI
    hosts = [ReplicaSlot(LAUNCHER, 0)] if mpi.run_launcher_as_node else []
    hosts += [ReplicaSlot(nodes, i) for i in range(job.replica_specs[nodes].replicas or 0)]
    names = [network.host_name(h.replica_type, h.index, subdomain=job.name) for h in hosts]
    config = f"{job.name}{MPI_HOSTFILE_SUFFIX}"
    files_dir = network.files_path(config, MPI_HOSTFILE_DIR)
    agent = f"{files_dir}/{mpi_launch.EXEC_AGENT}" if exec_mode else None
    launcher_env = mpi_launch.launcher_env(
        implementation, f"{files_dir}/{mpi_launch.HOSTFILE}", slots, agent=agent
    )
    if exec_mode:
        launcher_env.append(env(mpi_launch.EXEC_CONTAINER_VAR, job.main_container_name(nodes)))

    def container_for(replica_type: str) -> Container:
        wanted = job.main_container_name(replica_type)
        spec = job.replica_specs[replica_type]
        return next(c for c in spec.template.spec.containers if c.name == wanted)

    replicas = build_replicas(
        job,
        network,
        env_for=lambda slot: launcher_env if slot.replica_type == LAUNCHER else [],
        is_master=lambda slot: slot.replica_type == LAUNCHER,
        container_for=container_for,
        host_for=lambda slot: network.host_name(slot.replica_type, slot.index, subdomain=job.name),
    )
    stages = start_stages(runtime.spec.template.spec.replicated_jobs) or {}
    stages[LAUNCHER] = max(stages.get(LAUNCHER, 0), 1)
    hostfile = mpi_launch.hostfile(implementation, names, slots)
    config_files: tuple[FilePlan, ...] = (FilePlan(mpi_launch.HOSTFILE, hostfile),)
    if exec_mode:
        config_files += (mpi_launch.exec_agent_file(),)
    files = [
        FileSet(
            config,
            config_files,
            mount_path=MPI_HOSTFILE_DIR,
            # OpenMPI's orted looks for the agent's path where it runs too (never runs it).
            replica_types=(LAUNCHER, nodes) if exec_mode else (LAUNCHER,),
        )
    ]
    if not exec_mode:
        mount = mpi.ssh_auth_mount_path or DEFAULT_SSH_AUTH_MOUNT_PATH
        files.append(mpi_launch.ssh_key_files(f"{job.name}{MPI_SSH_SUFFIX}", mount))
    return Plan(
        kind=job.KIND,
        name=job.name,
        namespace=job.namespace,
        replicas=tuple(
            replace(
                r,
                stage=stages.get(r.replica_type, 0),
                host_only=exec_mode and r.replica_type == nodes,
            )
            for r in replicas
        ),
        outcome=success_policy(job),
        files=tuple(files),
        services=False,
        exposed=(ExposedService(job.name, replica_type="", type="Headless"),),
        subdomain=job.name,
        start_gate="succeeded"
        if start_gate(runtime.spec.template.spec.replicated_jobs) == "succeeded"
        else "running",
        status_extension=jobs_status,
    )


class Trainer:
    """The TrainJob framework."""

    kind = TrainJob.KIND

    def plan(self, job: Job, network: Network) -> Plan:
        """The Plan of a TrainJob: its runtime's steps, the policy's env on the trainer's."""
        if not isinstance(job, TrainJob):
            raise PlanError(f"the Trainer framework plans TrainJobs, not {job.KIND}")
        if job.framework == "mpi":
            return mpi_plan(job, network, exec_mode=False)
        trainer_job = job.trainer_job()
        if job.runtime is None or trainer_job is None:
            raise PlanError(
                f"TrainJob {job.name}: runtime {job.spec.runtime_ref.name!r} is unknown or "
                "has no trainer step; run `kubemill validate` on the manifest"
            )
        trainer_type = trainer_job.name
        policy_env = _POLICY_ENV.get(job.framework or "")

        def container_for(replica_type: str) -> Container:
            wanted = job.main_container_name(replica_type)
            spec = job.replica_specs[replica_type]
            return next(c for c in spec.template.spec.containers if c.name == wanted)

        trainer_container = container_for(trainer_type)
        port = trainer_port(job, trainer_container) if policy_env is not None else 0

        def env_for(slot: ReplicaSlot) -> list[EnvVar]:
            if policy_env is not None and slot.replica_type == trainer_type:
                return policy_env(job, network, slot, port, trainer_container)
            return []

        replicas = build_replicas(
            job,
            network,
            env_for=env_for,
            is_master=lambda slot: slot.replica_type == trainer_type and slot.index == 0,
            container_for=container_for,
        )
        stages = start_stages(job.runtime.spec.template.spec.replicated_jobs)
        if stages is None:
            raise PlanError(f"TrainJob {job.name}: its runtime's dependsOn go round")
        return Plan(
            kind=job.KIND,
            name=job.name,
            namespace=job.namespace,
            replicas=tuple(replace(r, stage=stages[r.replica_type]) for r in replicas),
            outcome=success_policy(job),
            # dependsOn: a replicated job's replicas start once those of the job it depends
            # on are Running and ready (Ready), or have all succeeded (Complete).
            start_gate=start_gate(job.runtime.spec.template.spec.replicated_jobs),
            status_extension=jobs_status,
        )


__all__ = [
    "Trainer",
    "gpus_per_node",
    "jax_env",
    "jobs_status",
    "mpi_plan",
    "mpi_slots",
    "num_proc_per_node",
    "success_policy",
    "torch_env",
    "xgboost_env",
]
