"""The Plan: a framework-neutral description of what to run for one job.

A framework (tensorflow, pytorch, ...) turns a job into a :class:`Plan`; the core
reconciles a Plan against what is observed; a substrate realises it (pods on Kubernetes,
processes locally). Addresses come from a :class:`Network` the substrate supplies, so
framework code never knows where it runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

from kubemill.api import (
    EnvVar,
    Job,
    JobStatus,
    PodTemplateSpec,
    RestartPolicy,
)

if TYPE_CHECKING:
    # Field types of replicas and Plans of some kinds only: a job that has none plans
    # without making their dataclasses (each one costs a compile of its methods). The
    # names of plan_parts are offered here too (:data:`__all__`), loaded on first use
    # (:func:`__getattr__`).
    from kubemill.frameworks.controlled import ChildController
    from kubemill.frameworks.plan_parts import (
        AccessPlan,
        AccessRule,
        ExposedService,
        FilePlan,
        FileSet,
        FileSource,
        ForeignPods,
        HostListing,
        NetworkPolicyPlan,
        ObservedPodView,
        PackagedProgram,
        RandomToken,
        RerunPolicy,
        RunRecord,
        RunRecordReader,
        ServiceCluster,
        ServicePolicy,
        ServicePort,
        ServiceView,
        SshKeyPart,
        submission_id,
        submitted_spec,
    )
    from kubemill.frameworks.remote import Attempts, RemoteReport, RemoteRun, RunRetry

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

    def replica_host(self, replica_type: str, index: int) -> str:
        """The host part of a replica's address, whatever the port (no port is reserved)."""
        ...

    def files_path(self, file_set: str, mount_path: str) -> str:
        """Where replicas read the files of a :class:`FileSet`: its ``mount_path`` in a pod,
        a directory of the job's own on the local substrate (env values use this)."""
        ...

    def host_name(self, replica_type: str, index: int, *, subdomain: str = "") -> str:
        """The name a replica goes by as a host, for tools that list hosts by name and reach
        them through a remote-shell agent (MPI's hostfile and ``discover_hosts.sh``).

        On Kubernetes its DNS name: ``<job>-worker-0.<subdomain>.<ns>.svc`` when the Plan
        gives its pods a ``subdomain`` (:attr:`Plan.subdomain`), else the per-replica
        service's name. Locally the replica's name (``<job>-worker-0``), which the local
        exec service resolves to that replica.
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
    """Start order: replicas of stage N are created once the earlier stages are up
    (:attr:`Plan.start_gate`)."""
    host: str = ""
    """The replica's address host (``<job>-worker-0.<job>.<ns>.svc``, ``127.0.0.1``), for
    files the core writes from running replicas (:class:`HostListing`)."""
    host_only: bool = False
    """The replica runs no program of its own: it is a host that others exec into (an MPI
    worker in exec mode whose container has no command). On Kubernetes its container
    waits; locally the supervisor runs an idle host in its place."""
    controller: ChildController | None = None
    """The replica runs through a child controller (a batch/v1 Job on Kubernetes, a process
    locally; see :mod:`kubemill.frameworks.controlled`)."""


@dataclass(frozen=True)
class SuccessPolicy:
    """The job succeeds when replicas of one type succeed, and fails when any fails for good.

    ``require="first"``: replica 0 of ``replica_type`` succeeded (TF chief or worker 0,
    PyTorch master; "the launcher decides" for MPI, "the driver decides" for Spark: see
    :func:`decided_by`); ``"all"``: every replica of the type succeeded; ``"any"``: at least
    one did (elastic PyTorch workers).
    """

    replica_type: str
    require: Literal["first", "all", "any"]


def decided_by(replica_type: str) -> SuccessPolicy:
    """ "The launcher decides" / "the driver decides": that one replica's exit is the verdict.

    Its success is the job's success; its permanent failure, like any replica's, the job's
    failure.
    """
    return SuccessPolicy(replica_type, "first")


OutcomeRule: TypeAlias = "SuccessPolicy | ServicePolicy"
"""How the core judges a job as a whole; each framework declares one per Plan (a
:class:`ServicePolicy`, a service's, is in :mod:`.plan_parts`)."""


class StatusExtension(Protocol):
    """A kind's own status fields, computed by the same core pass from what it decided.

    Returns field name -> value for fields that the kind's status model declares (Spark's
    ``applicationState``, the Mars endpoint). Pure, like the core.
    """

    def __call__(self, view: StatusView) -> Mapping[str, object]: ...


@dataclass(frozen=True)
class StatusView:
    """What a :class:`StatusExtension` sees: the job, its Plan, and the pass's outcome."""

    job: Job
    plan: Plan
    status: JobStatus
    """The status this pass decided (conditions and replica counts already set)."""
    pods: tuple[ObservedPodView, ...]
    """The job's own replica pods and their foreign pods, as observed."""
    run: RunRecord | None = None
    """What the core decided for an application with a :class:`RerunPolicy` (its state,
    attempts and times): the extension names it in the kind's own fields."""
    cluster_ips: tuple[tuple[str, str], ...] = ()
    """(service name, cluster IP) of the job's services that have one, as observed (e.g.
    the Spark UI's address); none locally."""
    service: ServiceView | None = None
    """What the service-cluster lifecycle decided (its endpoint, its ready pods)."""
    remote: RemoteReport | None = None
    """The last report of the Plan's :class:`RemoteRun` the core judged (None: none yet,
    or only an earlier attempt's)."""
    attempts: Attempts | None = None
    """The attempts of a Plan with a :class:`RunRetry`, as this pass counted them."""


def service_fields(view: StatusView) -> Mapping[str, object]:
    """The status extension of a service cluster whose status declares ``endpoint`` and
    ``ready_replicas`` (e.g. a ``ServiceStatus``): what its lifecycle decided, as is."""
    service = view.service
    if service is None:
        return {}
    return {"endpoint": service.endpoint, "ready_replicas": dict(service.ready)}


@dataclass(frozen=True)
class Plan:
    """Everything a substrate needs to run a job, and the core to judge it."""

    kind: str
    name: str
    namespace: str
    replicas: tuple[ReplicaPlan, ...]
    outcome: OutcomeRule
    files: tuple[FileSet, ...] = ()
    services: bool = True
    """One headless service per replica (Kubernetes); locally a no-op."""
    exposed: tuple[ExposedService, ...] = ()
    access: AccessPlan | None = None
    network_policies: tuple[NetworkPolicyPlan, ...] = ()
    foreign: tuple[ForeignPods, ...] = ()
    subdomain: str = ""
    """When set, each pod's hostname is its replica name and its subdomain this: the name of
    a ``Headless`` service in :attr:`exposed` (MPI's ``<job>``), so a replica is
    ``<name>.<subdomain>.<ns>.svc`` (:meth:`Network.host_name`)."""
    start_gate: Literal["running", "ready", "succeeded"] = "running"
    """Replicas of stage N are created once every replica of the earlier stages is Running
    (``"running"``), Running and ready (``"ready"``: MPI's WaitForWorkersReady), or has
    Succeeded (``"succeeded"``: a step that must finish first, such as an initializer)."""
    status_extension: StatusExtension | None = None
    reruns: RerunPolicy | None = None
    """What the re-run lifecycle (:mod:`kubemill.core.rerun`, chosen by the engine) reads
    of a job that runs again as a whole (see :class:`RerunPolicy`)."""
    service_cluster: ServiceCluster | None = None
    """What the service-cluster lifecycle (:mod:`kubemill.core.service`, chosen by the
    engine) reads of a cluster of controller-run replicas (a Mars cluster)."""
    remote: RemoteRun | None = None
    """A run handed to a service the job brings up, whose API decides the outcome (see
    :class:`RemoteRun`; the replica-set lifecycle judges it)."""
    retry: RunRetry | None = None
    """The whole run is tried again when it fails (see :class:`RunRetry`; the replica-set
    lifecycle applies it)."""
    clean_after: timedelta | None = None
    """How long after the job finished its ``cleanPodPolicy`` applies (None: at once), e.g.
    a Ray job's ``ttlSecondsAfterFinished``: its cluster deleted that long after the end."""
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


__all__ = [
    "LABEL_JOB_NAME",
    "LABEL_JOB_ROLE",
    "LABEL_OPERATOR",
    "LABEL_PREFIX",
    "LABEL_REPLICA_INDEX",
    "LABEL_REPLICA_TYPE",
    "OPERATOR_NAME",
    "AccessPlan",
    "AccessRule",
    "Endpoint",
    "ExposedService",
    "FilePlan",
    "FileSet",
    "FileSource",
    "ForeignPods",
    "Framework",
    "HostListing",
    "Network",
    "NetworkPolicyPlan",
    "ObservedPodView",
    "OutcomeRule",
    "PackagedProgram",
    "Plan",
    "RandomToken",
    "ReplicaPlan",
    "RerunPolicy",
    "RunRecord",
    "RunRecordReader",
    "ServiceCluster",
    "ServicePolicy",
    "ServicePort",
    "ServiceView",
    "SshKeyPart",
    "StatusExtension",
    "StatusView",
    "SuccessPolicy",
    "decided_by",
    "replica_name",
    "service_fields",
    "submission_id",
    "submitted_spec",
]


if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        """A name of :mod:`kubemill.frameworks.plan_parts` (the names in ``__all__`` not
        defined here), imported now (once). Any other name (``__path__``, which every
        ``from ... import`` asks for) is not there: it must not load them."""
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from kubemill.frameworks import plan_parts

        value = getattr(plan_parts, name)
        globals()[name] = value
        return value
