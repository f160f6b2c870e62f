"""Pieces every training framework shares: walking a job's replicas, labels, ports.

TensorFlow and PyTorch differ only in the environment they hand each replica and in
their success policy; how replicas are enumerated, named, labelled and given ports is
the same, so it lives here once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kubemill.api import Container, EnvVar, Job
from kubemill.frameworks.plan import (
    LABEL_JOB_NAME,
    LABEL_JOB_ROLE,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    Network,
    OutcomeRule,
    Plan,
    ReplicaPlan,
    replica_name,
)


class PlanError(ValueError):
    """A job cannot be planned (it should have failed validation; this names why)."""


@dataclass(frozen=True)
class ReplicaSlot:
    """One replica to plan: its type and index."""

    replica_type: str
    index: int


def replica_slots(job: Job) -> Iterator[ReplicaSlot]:
    """Every replica of ``job`` in the stable order: REPLICA_TYPES order, then index."""
    for rtype in job.REPLICA_TYPES:
        if rtype not in job.replica_specs:
            continue
        for index in range(job.replica_count(rtype)):
            yield ReplicaSlot(rtype, index)


def total_replicas(job: Job) -> int:
    """How many replicas the job asks for, over all types."""
    return sum(job.replica_count(rtype) for rtype in job.replica_specs)


def default_container(job: Job, replica_type: str) -> Container:
    """The container that receives the framework's environment (``tensorflow``, ...)."""
    spec = job.replica_specs[replica_type]
    for container in spec.template.spec.containers:
        if container.name == job.DEFAULT_CONTAINER:
            return container
    raise PlanError(
        f"{job.KIND} {job.name}: replica type {replica_type} has no container named "
        f"{job.DEFAULT_CONTAINER!r}; run `kubemill validate` on the manifest"
    )


def container_ports(container: Container) -> dict[str, int]:
    """The container's named ports (unnamed ports cannot be referred to, so are left out)."""
    return {p.name: p.container_port for p in container.ports or [] if p.name}


def framework_port(job: Job, replica_type: str) -> int:
    """The framework port (``tfjob-port``, ``pytorchjob-port``) of a replica type."""
    port = container_ports(default_container(job, replica_type)).get(job.DEFAULT_PORT_NAME)
    if port is None:
        # Defaulting adds the port, so only a hand-built model can get here.
        raise PlanError(
            f"{job.KIND} {job.name}: replica type {replica_type} has no port named "
            f"{job.DEFAULT_PORT_NAME!r} on container {job.DEFAULT_CONTAINER!r}"
        )
    return port


def build_replicas(
    job: Job,
    network: Network,
    *,
    env_for: Callable[[ReplicaSlot], list[EnvVar]],
    is_master: Callable[[ReplicaSlot], bool],
    container_for: Callable[[str], Container] | None = None,
    host_for: Callable[[ReplicaSlot], str] | None = None,
) -> tuple[ReplicaPlan, ...]:
    """One :class:`ReplicaPlan` per replica, with the framework's env and labels.

    ``container_for`` picks the container that gets the env (default: the kind's
    ``DEFAULT_CONTAINER``); ``host_for`` names a replica as a host (default: its address
    host, :meth:`Network.replica_host`).
    """

    def container_of(replica_type: str) -> Container:
        if container_for is not None:
            return container_for(replica_type)
        return default_container(job, replica_type)

    plans: list[ReplicaPlan] = []
    for slot in replica_slots(job):
        spec = job.replica_specs[slot.replica_type]
        labels = {
            LABEL_JOB_NAME: job.name,
            LABEL_REPLICA_TYPE: slot.replica_type.lower(),
            LABEL_REPLICA_INDEX: str(slot.index),
        }
        if is_master(slot):
            labels[LABEL_JOB_ROLE] = "master"
        plans.append(
            ReplicaPlan(
                replica_type=slot.replica_type,
                index=slot.index,
                name=replica_name(job.name, slot.replica_type, slot.index),
                template=spec.template,
                container=container_of(slot.replica_type).name,
                env=tuple(env_for(slot)),
                ports=container_ports(container_of(slot.replica_type)),
                restart_policy=job.restart_policy(slot.replica_type),
                labels=labels,
                host=(
                    host_for(slot)
                    if host_for is not None
                    else network.replica_host(slot.replica_type, slot.index)
                ),
            )
        )
    return tuple(plans)


def replica_plan(
    job: Job,
    network: Network,
    *,
    env_for: Callable[[ReplicaSlot], list[EnvVar]],
    is_master: Callable[[ReplicaSlot], bool],
    outcome: OutcomeRule,
) -> Plan:
    """The Plan of a job that is its replicas and nothing else (the training kinds): one
    :class:`ReplicaPlan` per replica, as :func:`build_replicas` makes them, and the
    framework's outcome rule."""
    return Plan(
        kind=job.KIND,
        name=job.name,
        namespace=job.namespace,
        replicas=build_replicas(job, network, env_for=env_for, is_master=is_master),
        outcome=outcome,
    )


def env(name: str, value: str) -> EnvVar:
    """A plain ``name=value`` environment variable."""
    return EnvVar(name=name, value=value)
