"""The parts of a :class:`~kubemill.frameworks.plan.Plan` that only some kinds use: files
delivered to replicas, per-job access and network policies, services beyond the
per-replica ones, foreign pods, an application's re-runs, a service cluster and its outcome
rule (:class:`ServicePolicy`), and what a kind's status extension sees.

They live apart from :mod:`kubemill.frameworks.plan` because every dataclass costs a
compile of its generated methods when its module is imported: submitting a job whose Plan
has none of them (``kubemill run --detach`` of a PyTorch job) makes none of them.
:mod:`kubemill.frameworks.plan` still offers each name (loaded on first use), so code that
builds such Plans imports them from there or from :mod:`kubemill.frameworks` as before.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol

from kubemill.api.runstates import ApplicationStateType

if TYPE_CHECKING:
    from kubemill.api import JobStatus


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
