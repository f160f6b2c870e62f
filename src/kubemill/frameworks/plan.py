"""The Plan: a framework-neutral description of what to run for one job.

A framework (tensorflow, pytorch, ...) turns a job into a :class:`Plan`; the core
reconciles a Plan against what is observed; a substrate realises it (pods on Kubernetes,
processes locally). Addresses come from a :class:`Network` the substrate supplies, so
framework code never knows where it runs.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol

from kubemill.api import (
    EnvVar,
    Job,
    JobStatus,
    PodTemplateSpec,
    RestartPolicy,
)
from kubemill.api.runstates import ApplicationStateType

if TYPE_CHECKING:
    # Field types of replicas and Plans of some kinds only: a job that has neither plans
    # without making their dataclasses (each one costs a compile of its methods).
    from kubemill.frameworks.controlled import ChildController
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


@dataclass(frozen=True)
class ServicePolicy:
    """A long-running service (a Mars cluster): it never succeeds.

    The job is ``Ready`` while at least ``min_ready`` replicas of ``replica_type`` are
    running and ready, and not Ready (with the count in the message) otherwise. It fails by
    the rules every job has: a replica failing for good under its restart policy,
    ``backoffLimit``, ``activeDeadlineSeconds``.
    """

    replica_type: str
    min_ready: int = 1
    also_ready: tuple[tuple[str, int], ...] = ()
    """More replica types that need ready replicas too, ``(type, count)`` (a local Mars
    cluster: every supervisor and ``minWorkerNum`` workers)."""

    @property
    def needed(self) -> tuple[tuple[str, int], ...]:
        """Every ``(type, count)`` of ready replicas the job needs to be Ready."""
        return ((self.replica_type, self.min_ready), *self.also_ready)


OutcomeRule = SuccessPolicy | ServicePolicy
"""How the core judges a job as a whole; each framework declares one per Plan."""


@dataclass(frozen=True)
class HostListing:
    """File content the core writes from the job's running replicas of one type.

    One line per replica of ``replica_type`` whose pod is Running, by index, formatted from
    ``line`` with ``{host}`` (the replica's address host) and ``{index}``; e.g. an MPI
    ``discover_hosts.sh`` kept current as workers come and go. ``header`` comes first.
    """

    replica_type: str
    line: str
    header: str = ""


@dataclass(frozen=True)
class PackagedProgram:
    """Content that is the source of a program shipped with kubemill, read by the substrate.

    ``module`` names an engine's agent, ``kubemill.engines.<engine>.agent`` (a standalone
    program that runs inside a job's containers, e.g. MPI's exec agent); frameworks are pure
    and cannot read files, so the substrate puts the module's source text in the file when
    it writes the set.
    """

    module: str


@dataclass(frozen=True)
class SshKeyPart:
    """Content the substrate generates once per job: one part of an SSH key pair.

    The parts of one FileSet come from the same pair (``private``: the private key in
    OpenSSH PEM form; ``public``: its ``authorized_keys`` line). The core never sees the key,
    so it never rewrites the set: its digest covers only this description.
    """

    part: Literal["private", "public"]


@dataclass(frozen=True)
class RandomToken:
    """Content the substrate generates once per job: a random token (256 bits, in hex), a
    shared secret between the job's processes and whoever the substrate lets read the set
    (a Ray cluster's authentication token). As with an SSH key, the core never sees it."""


FileSource = PackagedProgram | SshKeyPart | RandomToken
"""Content a substrate supplies for a :class:`FilePlan`, where a pure framework cannot."""


@dataclass(frozen=True)
class FilePlan:
    """One file of a :class:`FileSet`: its key (file name), content and mode.

    ``listing`` makes the content dynamic: the core renders it from the running replicas,
    and the substrate updates the file in place whenever it changes. ``source`` has the
    substrate supply the content (a packaged program, a generated key). ``paths`` are the
    names the file has where the set is mounted (empty: its key), e.g. an SSH public key
    that is both ``id_rsa.pub`` and ``authorized_keys``.
    """

    name: str
    content: str = ""
    mode: int = 0o644
    listing: HostListing | None = None
    source: FileSource | None = None
    paths: tuple[str, ...] = ()

    @property
    def mounted_as(self) -> tuple[str, ...]:
        """The file's names in the mounted set."""
        return self.paths or (self.name,)


@dataclass(frozen=True)
class FileSet:
    """Files delivered together: a ConfigMap (or a Secret) on Kubernetes, a directory locally.

    ``mount_path`` is where replicas see the files on Kubernetes (locally the substrate
    places them under the job's directory). ``replica_types`` limits which replicas get
    them (empty: every replica). A ``secret`` set is a Secret, hidden in ``render`` output
    unless asked for. The core creates the set before the pods that mount it, and rewrites
    it in place whenever its content (see :class:`HostListing`) changes.
    """

    name: str
    files: tuple[FilePlan, ...]
    mount_path: str
    secret: bool = False
    replica_types: tuple[str, ...] = ()
    secret_type: str = "Opaque"  # noqa: S105 - a Secret type name, not a password
    """A Secret's ``type`` (``kubernetes.io/ssh-auth`` for SSH keys)."""


@dataclass(frozen=True)
class AccessRule:
    """One rule of the per-job Role (RBAC ``PolicyRule``); ``resource_names`` narrows it to
    those objects (an MPI launcher may exec into its own workers only)."""

    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    resource_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class AccessPlan:
    """A per-job ServiceAccount, Role and RoleBinding, all named ``name``.

    Replicas of ``replica_types`` (empty: every replica) run as that ServiceAccount, e.g. an
    MPI launcher that execs into its workers, a Spark driver that creates executors. Locally
    there is no API to grant access to: the substrate records it and does nothing else.
    """

    name: str
    rules: tuple[AccessRule, ...]
    replica_types: tuple[str, ...] = ()


@dataclass(frozen=True)
class NetworkPolicyPlan:
    """A NetworkPolicy of the job: pods labelled ``pod_labels`` take connections only from
    pods labelled ``from_labels`` (Spark's ``<app>-policy``: an application's executors
    accept its own pods only). The labels are any pods', not only the Plan's replicas' (a
    Spark executor is a foreign pod). Locally there is no network to police: none is
    asked for."""

    name: str
    pod_labels: Mapping[str, str]
    from_labels: Mapping[str, str]


@dataclass(frozen=True)
class ServicePort:
    """One port of an exposed service; ``node_port`` pins a NodePort (None: allocated)."""

    name: str
    port: int
    target_port: int
    node_port: int | None = None
    app_protocol: str | None = None
    """The port's application protocol (``appProtocol``, e.g. Spark Connect's ``grpc``)."""


@dataclass(frozen=True)
class ExposedService:
    """A service beyond the per-replica headless ones: a NodePort, a UI, a load balancer,
    or one headless service for the whole job (``Headless``, see :attr:`Plan.subdomain`).

    It selects the pods of ``replica_type`` (every replica of the job when empty; only
    replica ``index`` when set). Locally the replicas' own 127.0.0.1 ports serve the same
    purpose.
    """

    name: str
    replica_type: str
    ports: tuple[ServicePort, ...] = ()
    type: Literal["ClusterIP", "NodePort", "LoadBalancer", "Headless"] = "ClusterIP"
    index: int | None = None


@dataclass(frozen=True)
class ForeignPods:
    """Pods that replicas of ``owner_type`` create themselves (Spark executors).

    The substrate reports them with the replica that owns them; the core counts them under
    ``replica_type`` in ``status.replicaStatuses`` and never deletes them: they go with
    their owner (its ownerReference on Kubernetes).
    """

    replica_type: str
    owner_type: str


@dataclass(frozen=True)
class RunRecord:
    """Where an application that runs as a whole stands: the core's memory between passes.

    The core decides every field (:mod:`kubemill.core.application`); the kind keeps them in
    its status (the spark-operator's ``applicationState``, ``submissionAttempts`` ...), and
    its :class:`RerunPolicy` reads them back for the next pass.
    """

    state: ApplicationStateType = ApplicationStateType.NEW
    error: str = ""
    """Why the application failed, or why its last submission did."""
    submission_attempts: int = 0
    """Submissions of the current run (the first and its retries after refusals)."""
    execution_attempts: int = 0
    """Runs the API accepted since the application was created (or its spec changed)."""
    last_submission: datetime | None = None
    terminated: datetime | None = None
    """When the current run ended (its driver finished, failed or went missing)."""
    submission_id: str = ""
    spec_digest: str = ""
    """The :attr:`RerunPolicy.spec_digest` the current run was submitted with."""


_SPEC_DIGEST = re.compile(r"[0-9a-f]{12}")
"""A :attr:`RerunPolicy.spec_digest` that a submission ID can carry."""


def submission_id(uid: str, now: datetime, record: RunRecord, spec_digest: str) -> str:
    """The ID of a submission the core decides (pure: no uuid4), UUID-shaped as the
    spark-operator's: its first four groups digest what makes it unique (the job's uid,
    the time, the attempts), its last group is the spec digest it was submitted with, so
    that the ID alone says which spec runs (:func:`submitted_spec`)."""
    key = f"{uid}/{now.isoformat()}/{record.execution_attempts}/{record.submission_attempts}"
    h = hashlib.sha256(key.encode()).hexdigest()
    tail = spec_digest if _SPEC_DIGEST.fullmatch(spec_digest) else h[20:32]
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{tail}"


def submitted_spec(submission: str) -> str:
    """The spec digest a submission ID carries ("" for an ID that carries none)."""
    head, _, tail = submission.rpartition("-")
    return tail if head and _SPEC_DIGEST.fullmatch(tail) else ""


class RunRecordReader(Protocol):
    """Reads a kind's status back into the :class:`RunRecord` the core wrote there."""

    def __call__(self, status: JobStatus) -> RunRecord: ...


@dataclass(frozen=True)
class RerunPolicy:
    """The job is one application that runs again as a whole (a Spark application).

    Its deciding replica (the :attr:`Plan.outcome`'s type, index 0: the driver) is the
    application: the core submits it, judges its end and, as this policy says, deletes it
    and submits it again, keeping files, services and access. Other replicas' pods go with
    it (foreign pods, by ownerReference). ``None`` retries mean "without limit".
    """

    recorded: RunRecordReader
    on_failure_retries: int | None = 0
    """Re-runs after a failed run (0: none; ``None``: always)."""
    on_failure_interval: timedelta = timedelta(0)
    """Measured from the failed run's termination."""
    on_submission_failure_retries: int | None = 0
    """New submissions after the API refused one (0: none; ``None``: always)."""
    on_submission_failure_interval: timedelta = timedelta(0)
    """Measured from the refused submission."""
    after_success: bool = False
    """Run again after a success too (the spark-operator's ``Always``)."""
    time_to_live: timedelta | None = None
    """Delete the job this long after its final termination."""
    spec_digest: str = ""
    """A digest of what the user asked for (12 hex digits, so that submission IDs carry
    it): a run submitted with another is re-run (INVALIDATING). Fields that do not change
    the run (suspend, the TTL) stay out of it."""


class StatusExtension(Protocol):
    """A kind's own status fields, computed by the same core pass from what it decided.

    Returns field name -> value for fields that the kind's status model declares (Spark's
    ``applicationState``, the Mars endpoint). Pure, like the core.
    """

    def __call__(self, view: StatusView) -> Mapping[str, object]: ...


@dataclass(frozen=True)
class ServiceCluster:
    """A cluster whose replicas a Kubernetes controller keeps running (a Mars cluster's
    Deployments), rather than pods the core creates one by one.

    ``objects`` are built whole by the framework's pure builders (RBAC, Deployments,
    Services), in creation order; the core creates each one missing and never judges a pod
    by its name. The cluster is Ready while every role has ``ready_needed`` ready pods;
    its endpoint is ``http://<host IP of a ready pod of web_type>:<web_service's node
    port>``. Kubernetes only: the local substrate does not run such Plans.
    """

    objects: tuple[Mapping[str, Any], ...]
    ready_needed: Mapping[str, int]
    """Replica type -> ready pods needed."""
    web_service: str
    """The NodePort Service whose node port is the endpoint's port."""
    web_type: str
    """The replica type whose node serves the endpoint."""


@dataclass(frozen=True)
class ServiceView:
    """What the service-cluster lifecycle decided of a cluster's serving, for its status
    extension (a neutral record, as :class:`RunRecord` is for a re-run application)."""

    endpoint: str | None
    """Where the cluster serves while it is Ready (None: not Ready, or stopped)."""
    ready: Mapping[str, int]
    """Ready pods by replica type (empty once stopped)."""


def service_fields(view: StatusView) -> Mapping[str, object]:
    """The status extension of a service cluster whose status declares ``endpoint`` and
    ``ready_replicas`` (e.g. a ``ServiceStatus``): what its lifecycle decided, as is."""
    service = view.service
    if service is None:
        return {}
    return {"endpoint": service.endpoint, "ready_replicas": dict(service.ready)}


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


@dataclass(frozen=True)
class ObservedPodView:
    """A pod as a status extension sees it (a projection of the core's observation)."""

    name: str
    replica_type: str
    index: int
    phase: str
    ready: bool
    owner: str = ""
    """For a foreign pod, the replica pod that created it."""


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
