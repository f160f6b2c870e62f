"""What each ML policy kubemill plans sets on the trainer's nodes, as upstream's plugins do:
the port its trainer container is given and the env names a TrainJob may not set itself."""

from __future__ import annotations

from kubemill.engines.trainer.api.runtime import TrainingRuntime

TRAINER_PORT = 29500
"""The port upstream gives the trainer container (torchrun's master port)."""
TORCH_RESERVED_ENV = frozenset(
    {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"}
)
"""What the torch policy sets itself; a trainer's env may not (upstream refuses them too)."""
XGBOOST_RESERVED_ENV = frozenset(
    {"DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER"}
)
"""What the xgboost policy sets itself (upstream's ``XGBoostReservedEnvNames``)."""
JAX_PORT = 6666
"""The port of JAX's coordinator on node 0 (the JAX plugin gives the trainer container it)."""
JAX_RESERVED_ENV = frozenset(
    {
        "JAX_NUM_PROCESSES",
        "JAX_PROCESS_ID",
        "JAX_COORDINATOR_ADDRESS",
        "JAX_COORDINATOR_PORT",
        "JAX_DISTRIBUTED_BACKEND",
    }
)
"""What the jax policy sets itself."""
MPI_RESERVED_ENV = frozenset(
    {
        "OMPI_MCA_orte_default_hostfile",
        "OMPI_MCA_orte_keep_fqdn_hostnames",
        "OMPI_MCA_orte_set_default_slots",
        "OMPI_MCA_plm_rsh_args",
    }
)
"""What the mpi policy sets on the launcher (OpenMPI's hostfile, slots and remote shell)."""
RESERVED_ENV = {
    "torch": TORCH_RESERVED_ENV,
    "xgboost": XGBOOST_RESERVED_ENV,
    "jax": JAX_RESERVED_ENV,
    "mpi": MPI_RESERVED_ENV,
}
RUN_POLICIES = ("torch", "xgboost", "jax", "mpi")
"""The ML policies kubemill plans (a runtime with another is refused, naming it)."""
POLICY_PORTS = {"torch": TRAINER_PORT, "xgboost": TRAINER_PORT, "jax": JAX_PORT}
"""The port upstream's plugin of each policy gives the trainer container."""


def mpi_runtime_errors(
    runtime: TrainingRuntime, launcher: str, nodes: tuple[str, ...]
) -> list[tuple[str, str, str]]:
    """(path, message, hint) for what an mpi runtime needs and lacks: OpenMPI (the one
    implementation upstream's plugin runs), a ``launcher`` and a replicated job of hosts."""
    policy = runtime.spec.ml_policy
    mpi = policy.mpi if policy is not None else None
    if mpi is None:
        return []
    found: list[tuple[str, str, str]] = []
    if mpi.mpi_implementation not in (None, "", "OpenMPI"):
        found.append(
            (
                "spec.mlPolicy.mpi.mpiImplementation",
                f"not supported: {mpi.mpi_implementation}; upstream's mpi plugin runs OpenMPI",
                "OpenMPI",
            )
        )
    names = [job.name for job in runtime.spec.template.spec.replicated_jobs]
    if launcher not in names or not any(name in names for name in nodes):
        found.append(
            (
                "spec.template.spec.replicatedJobs",
                f"the mpi policy needs a {launcher!r} replicated job and one of "
                f"{', '.join(repr(n) for n in nodes)} (its hosts)",
                "add them",
            )
        )
    return found


__all__ = [
    "JAX_PORT",
    "JAX_RESERVED_ENV",
    "MPI_RESERVED_ENV",
    "POLICY_PORTS",
    "RESERVED_ENV",
    "RUN_POLICIES",
    "TORCH_RESERVED_ENV",
    "TRAINER_PORT",
    "XGBOOST_RESERVED_ENV",
    "mpi_runtime_errors",
]
