"""JAX: a JAXJob becomes a Plan whose replicas carry what ``jax.distributed.initialize``
needs, as Kubeflow training-operator v1 (its JAX controller's ``envvar.go``) sets it:

- ``PYTHONUNBUFFERED=1``;
- ``COORDINATOR_PORT``: worker 0's jaxjob-port (6666 by default), as the network maps it;
- ``COORDINATOR_ADDRESS``: worker 0's *short* address (``<job>-worker-0`` on Kubernetes,
  the loopback address locally), without the port;
- ``NUM_PROCESSES``: the number of Worker replicas;
- ``PROCESS_ID``: the replica's index.

A program starts JAX's distributed runtime with
``jax.distributed.initialize(f"{COORDINATOR_ADDRESS}:{COORDINATOR_PORT}",
num_processes=NUM_PROCESSES, process_id=PROCESS_ID)``; process 0 serves the coordinator on
that port. Upstream gives every container of the pod these variables; kubemill gives them
to the ``jax`` container, the one the kind's program runs in (as for every other kind), so
a sidecar does not see them.

The job succeeds when every worker has (upstream: ``expected == 0`` for Worker) and fails
when one fails for good under its restart policy (``Never`` by default).
"""

from __future__ import annotations

from kubemill.api import EnvVar, Job
from kubemill.engines.jax.api import JAXJob
from kubemill.frameworks._common import (
    PlanError,
    ReplicaSlot,
    env,
    framework_port,
    replica_plan,
    total_replicas,
)
from kubemill.frameworks.jax_env import JaxProcess, coordinator
from kubemill.frameworks.plan import Network, Plan, SuccessPolicy

WORKER = "Worker"


ENV_NAMES = {
    "port": "COORDINATOR_PORT",
    "host": "COORDINATOR_ADDRESS",
    "processes": "NUM_PROCESSES",
    "id": "PROCESS_ID",
}
"""Training-operator v1's names for JAX's coordinator (the host alone), in its order."""


def jax_env(job: JAXJob, network: Network, slot: ReplicaSlot) -> list[EnvVar]:
    """The environment of one replica, in upstream's order."""
    process = JaxProcess(
        coordinator(network, WORKER, framework_port(job, WORKER)),
        total_replicas(job),
        slot.index,
    )
    return [env("PYTHONUNBUFFERED", "1"), *process.env(ENV_NAMES)]


class Jax:
    """The JAXJob framework."""

    kind = JAXJob.KIND

    def plan(self, job: Job, network: Network) -> Plan:
        """The Plan of a JAXJob: the coordinator env on every worker; all must succeed."""
        if not isinstance(job, JAXJob):
            raise PlanError(f"the JAX framework plans JAXJobs, not {job.KIND}")
        return replica_plan(
            job,
            network,
            env_for=lambda slot: jax_env(job, network, slot),
            # Upstream labels worker 0, the coordinator, with the master role.
            is_master=lambda slot: slot.index == 0,
            outcome=SuccessPolicy(WORKER, "all"),
        )


__all__ = ["Jax", "jax_env"]
