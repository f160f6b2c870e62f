"""What each ML policy kubemill plans sets on the trainer's nodes, as upstream's plugins do:
the port its trainer container is given and the env names a TrainJob may not set itself."""

from __future__ import annotations

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
RESERVED_ENV = {
    "torch": TORCH_RESERVED_ENV,
    "xgboost": XGBOOST_RESERVED_ENV,
    "jax": JAX_RESERVED_ENV,
}
RUN_POLICIES = ("torch", "xgboost", "jax")
"""The ML policies kubemill plans (a runtime with another is refused, naming it)."""
POLICY_PORTS = {"torch": TRAINER_PORT, "xgboost": TRAINER_PORT, "jax": JAX_PORT}
"""The port upstream's plugin of each policy gives the trainer container."""


__all__ = [
    "JAX_PORT",
    "JAX_RESERVED_ENV",
    "POLICY_PORTS",
    "RESERVED_ENV",
    "RUN_POLICIES",
    "TORCH_RESERVED_ENV",
    "TRAINER_PORT",
    "XGBOOST_RESERVED_ENV",
]
