"""PyTorch: a PyTorchJob becomes a Plan whose replicas carry the torch.distributed env.

Semantics of Kubeflow training-operator v1 (``envvar.go``, ``master.go``, ``elastic.go``),
set on the ``pytorch`` container of every replica:

- always ``PYTHONUNBUFFERED`` (``1``; upstream writes ``0``, which Python treats the
  same: any non-empty value disables buffering);
- with a Master: ``MASTER_PORT``/``PET_MASTER_PORT`` (the master's pytorchjob-port, as
  the network maps it) and ``MASTER_ADDR``/``PET_MASTER_ADDR`` (the master's *short*
  address, ``<job>-master-0`` on Kubernetes), ``WORLD_SIZE`` (all replicas times
  ``nprocPerNode`` when that is a number, else times 1), ``RANK`` and ``PET_NODE_RANK``
  (master 0, worker i is i+1) and ``PET_NPROC_PER_NODE`` (``spec.nprocPerNode``,
  defaulted to ``auto``);
- without elasticPolicy: ``PET_NNODES`` = number of replicas;
- with elasticPolicy: ``PET_RDZV_ENDPOINT`` (``rdzvHost`` or worker 0's short address,
  ``rdzvPort`` or the worker's pytorchjob-port), ``PET_RDZV_BACKEND`` (default
  ``c10d``), ``PET_NNODES=min:max``, and when given ``PET_MAX_RESTARTS``,
  ``PET_NPROC_PER_NODE`` (``elasticPolicy.nProcPerNode``, else ``spec.nprocPerNode``),
  ``PET_RDZV_ID``, ``PET_RDZV_CONF`` (``k=v,k=v``) and ``PET_STANDALONE``. An elastic
  job without a Master gets no ``MASTER_*``, ``WORLD_SIZE`` or ``RANK``: torchrun's
  rendezvous assigns ranks and the world size changes with the membership.

A name set twice (upstream can emit ``PET_NPROC_PER_NODE`` from both the master and the
elastic generator) appears once, at its first position, with the later value.
"""

from __future__ import annotations

from kubemill.api import EnvVar, Job
from kubemill.engines.pytorch.api import PyTorchJob
from kubemill.frameworks._common import (
    PlanError,
    ReplicaSlot,
    env,
    framework_port,
    replica_plan,
    total_replicas,
)
from kubemill.frameworks.plan import Network, Plan, SuccessPolicy

MASTER = "Master"
WORKER = "Worker"
DEFAULT_NPROC_PER_NODE = "auto"
DEFAULT_RDZV_BACKEND = "c10d"


def nproc_per_node(job: PyTorchJob) -> str:
    """``spec.nprocPerNode`` as torchrun takes it (``auto`` when unset)."""
    return job.spec.nproc_per_node or DEFAULT_NPROC_PER_NODE


def world_size(job: PyTorchJob) -> int:
    """All replicas times the processes per replica (1 when that is not a number)."""
    nproc = nproc_per_node(job)
    return total_replicas(job) * (int(nproc) if nproc.isdigit() else 1)


def rank(slot: ReplicaSlot) -> int:
    """The node rank: the master is 0, worker i is i + 1."""
    return slot.index + (1 if slot.replica_type == WORKER else 0)


def master_env(job: PyTorchJob, network: Network, slot: ReplicaSlot) -> list[EnvVar]:
    """MASTER_*, PET_MASTER_*, WORLD_SIZE, RANK, PET_NPROC_PER_NODE, PET_NODE_RANK."""
    master = network.endpoint(MASTER, 0, framework_port(job, MASTER), qualified=False)
    node_rank = str(rank(slot))
    return [
        env("MASTER_PORT", str(master.port)),
        env("PET_MASTER_PORT", str(master.port)),
        env("MASTER_ADDR", master.host),
        env("PET_MASTER_ADDR", master.host),
        env("WORLD_SIZE", str(world_size(job))),
        env("RANK", node_rank),
        env("PET_NPROC_PER_NODE", nproc_per_node(job)),
        env("PET_NODE_RANK", node_rank),
    ]


def elastic_env(job: PyTorchJob, network: Network) -> list[EnvVar]:
    """The PET_* variables torchrun reads for rendezvous (same for every replica)."""
    policy = job.spec.elastic_policy
    if policy is None:
        return []
    if WORKER not in job.replica_specs:
        raise PlanError(f"PyTorchJob {job.name}: elasticPolicy needs Worker replicas")
    port = policy.rdzv_port or framework_port(job, WORKER)
    if policy.rdzv_host:
        endpoint = f"{policy.rdzv_host}:{port}"
    else:
        endpoint = str(network.endpoint(WORKER, 0, port, qualified=False))
    low, high = job.elastic_bounds
    out = [
        env("PET_RDZV_ENDPOINT", endpoint),
        env("PET_RDZV_BACKEND", policy.rdzv_backend or DEFAULT_RDZV_BACKEND),
        env("PET_NNODES", f"{low}:{high}"),
    ]
    if policy.max_restarts is not None:
        out.append(env("PET_MAX_RESTARTS", str(policy.max_restarts)))
    nproc = str(policy.n_proc_per_node) if policy.n_proc_per_node else nproc_per_node(job)
    out.append(env("PET_NPROC_PER_NODE", nproc))
    if policy.rdzv_id:
        out.append(env("PET_RDZV_ID", policy.rdzv_id))
    if policy.rdzv_conf:
        out.append(env("PET_RDZV_CONF", ",".join(f"{c.key}={c.value}" for c in policy.rdzv_conf)))
    if policy.standalone:
        out.append(env("PET_STANDALONE", ""))
    return out


def pytorch_env(job: PyTorchJob, network: Network, slot: ReplicaSlot) -> list[EnvVar]:
    """The full environment contract of one replica, in upstream's order."""
    out = [env("PYTHONUNBUFFERED", "1")]
    if MASTER in job.replica_specs:
        out += master_env(job, network, slot)
    if job.spec.elastic_policy is not None:
        out += elastic_env(job, network)
    else:
        out.append(env("PET_NNODES", str(total_replicas(job))))
    return _last_value_wins(out)


def _last_value_wins(variables: list[EnvVar]) -> list[EnvVar]:
    by_name: dict[str, EnvVar] = {}
    for var in variables:
        by_name[var.name] = var  # dicts keep the first insertion's position
    return list(by_name.values())


def success_policy(job: PyTorchJob) -> SuccessPolicy:
    """The master decides if present; elastic: any worker; else all workers."""
    if MASTER in job.replica_specs:
        return SuccessPolicy(MASTER, "first")
    if job.is_elastic:
        return SuccessPolicy(WORKER, "any")
    return SuccessPolicy(WORKER, "all")


class PyTorch:
    """The PyTorchJob framework."""

    kind = PyTorchJob.KIND

    def plan(self, job: Job, network: Network) -> Plan:
        """The Plan of a PyTorchJob: torch.distributed / torchrun env on every replica."""
        if not isinstance(job, PyTorchJob):
            raise PlanError(f"the PyTorch framework plans PyTorchJobs, not {job.KIND}")
        return replica_plan(
            job,
            network,
            env_for=lambda slot: pytorch_env(job, network, slot),
            is_master=lambda slot: slot.replica_type == MASTER,
            outcome=success_policy(job),
        )


__all__ = ["PyTorch", "nproc_per_node", "pytorch_env", "rank", "success_policy", "world_size"]
