"""The Plan: a framework-neutral description of what to run for one job.

A framework (tensorflow, pytorch, ...) turns a job into a :class:`Plan`; the core
reconciles a Plan against what is observed; a substrate realises it (pods on Kubernetes,
processes locally). Addresses come from a :class:`Network` the substrate supplies, so
framework code never knows where it runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from kubemill.api import EnvVar, Job, PodTemplateSpec, RestartPolicy

LABEL_PREFIX = "kubemill.dev/"
LABEL_JOB_NAME = LABEL_PREFIX + "job-name"
LABEL_REPLICA_TYPE = LABEL_PREFIX + "replica-type"
LABEL_REPLICA_INDEX = LABEL_PREFIX + "replica-index"
LABEL_JOB_ROLE = LABEL_PREFIX + "job-role"
LABEL_OPERATOR = LABEL_PREFIX + "operator-name"
OPERATOR_NAME = "kubemill"


def replica_name(job_name: str, replica_type: str, index: int) -> str:
    """The deterministic pod (and headless service) name: ``<job>-<type lowercased>-<index>``."""
    return f"{job_name}-{replica_type.lower()}-{index}"


@dataclass(frozen=True)
class Endpoint:
    """Where a replica listens: a host name or IP and a port."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


class Network(Protocol):
    """Addresses of a job's replicas, supplied by the substrate.

    On Kubernetes ``endpoint("Worker", 0, 2222)`` is ``<job>-worker-0.<ns>.svc:2222``;
    locally it is ``127.0.0.1:<a free port reserved for that replica and port>``.
    """

    def endpoint(
        self, replica_type: str, index: int, container_port: int, *, qualified: bool = True
    ) -> Endpoint:
        """The address other replicas use to reach ``container_port`` of one replica.

        ``qualified=False`` asks for the short form (``<job>-master-0`` on Kubernetes),
        which upstream PyTorch uses for ``MASTER_ADDR``; locally both forms are the same.
        """
        ...


@dataclass(frozen=True)
class ReplicaPlan:
    """One replica (one pod / one process) of a job."""

    replica_type: str
    """Canonical replica type, e.g. ``Worker``."""
    index: int
    name: str
    """``<job>-<type>-<index>``: pod and service name."""
    template: PodTemplateSpec
    """The user's pod template for this type, unchanged."""
    container: str
    """The container that receives ``env`` (``tensorflow``, ``pytorch``, ...)."""
    env: tuple[EnvVar, ...]
    """The framework's environment contract, appended to that container's env."""
    ports: Mapping[str, int]
    """Container ports by name (``tfjob-port: 2222``), as the manifest declares them."""
    restart_policy: RestartPolicy
    labels: Mapping[str, str]
    """kubemill.dev/* labels for this replica (template labels are kept separately)."""
    stage: int = 0
    """Start order: replicas of stage N are created once stage N-1 is running."""


@dataclass(frozen=True)
class SuccessPolicy:
    """When the job as a whole has succeeded.

    ``require="first"``: replica 0 of ``replica_type`` succeeded (TF chief or worker 0,
    PyTorch master); ``"all"``: every replica of the type succeeded; ``"any"``: at least
    one did (elastic PyTorch workers).
    """

    replica_type: str
    require: Literal["first", "all", "any"]


@dataclass(frozen=True)
class FilePlan:
    """A file delivered to replicas (hostfile, script, key); ``secret`` hides it in output."""

    name: str
    content: str
    mode: int = 0o644
    secret: bool = False


@dataclass(frozen=True)
class Plan:
    """Everything a substrate needs to run a job, and the core to judge it."""

    kind: str
    name: str
    namespace: str
    replicas: tuple[ReplicaPlan, ...]
    success: SuccessPolicy
    files: tuple[FilePlan, ...] = ()
    services: bool = True
    """One headless service per replica (Kubernetes); locally a no-op."""
    annotations: Mapping[str, str] = field(default_factory=dict)

    def replica(self, name: str) -> ReplicaPlan:
        """The replica of this name (KeyError if the Plan has none)."""
        for rep in self.replicas:
            if rep.name == name:
                return rep
        raise KeyError(name)

    def of_type(self, replica_type: str) -> tuple[ReplicaPlan, ...]:
        """The replicas of one type, by index."""
        return tuple(r for r in self.replicas if r.replica_type == replica_type)


class Framework(Protocol):
    """One engine's plugin: how a job of its kind becomes a Plan."""

    kind: str

    def plan(self, job: Job, network: Network) -> Plan:
        """Build the Plan of ``job`` with addresses from ``network``."""
        ...
