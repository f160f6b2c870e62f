"""What the reconciler takes in (observations) and gives back (actions and a status).

All plain frozen dataclasses: the core is pure, so a substrate translates its world
(Kubernetes pods, local processes) into :class:`Observed` and carries out the
:class:`Action` values it receives.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from kubemill.api import JobStatus
from kubemill.frameworks import FileSource, RemoteReport

PodPhase = Literal["Pending", "Running", "Succeeded", "Failed", "Unknown"]


@dataclass(frozen=True)
class ObservedPod:
    """One replica's pod (or local process) as last seen."""

    name: str
    replica_type: str
    index: int
    phase: PodPhase
    exit_code: int | None = None
    """The main container's last exit code, once it has terminated."""
    restart_count: int = 0
    """In-place restarts of the main container (pod restartPolicy OnFailure/Always)."""
    ready: bool = False
    created: datetime | None = None
    started: datetime | None = None
    finished: datetime | None = None
    deleting: bool = False
    """Deletion requested but not finished (Kubernetes deletionTimestamp)."""
    reason: str = ""
    """Why it is in this phase, e.g. ``OOMKilled`` or ``Unschedulable``."""
    message: str = ""
    """The main container's termination message, when its run failed and left one (with
    ``terminationMessagePolicy: FallbackToLogsOnError``, the tail of its log): a failure
    of the job names it."""
    uid: str = ""
    host_ip: str = ""
    """The IP of the pod's node (``status.hostIP``): where a NodePort service answers."""
    owner: str = ""
    """Set for a foreign pod: the name of the job's replica pod that created it (a Spark
    executor's driver). Such pods are counted, never judged or deleted by the core."""


@dataclass(frozen=True)
class ObservedPodGroup:
    """The gang-scheduling PodGroup, when one is used."""

    name: str
    phase: str = ""
    """``Pending``, ``Inqueue``, ``Running``, ... as the scheduler reports it."""


ChildKind = Literal[
    "ConfigMap", "Secret", "ServiceAccount", "Role", "RoleBinding", "Deployment", "NetworkPolicy"
]
"""Children beyond pods, services and PodGroups (files, per-job access, a service
cluster's Deployments, network policies)."""


def content_digest(content: object) -> str:
    """A short, stable digest of JSON-like content: what the core asks a substrate to record
    on an object it writes (files, a service cluster's objects) and compares on later passes."""
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ObservedChild:
    """A ConfigMap, Secret, ServiceAccount, Role, RoleBinding or NetworkPolicy of the job
    that exists."""

    kind: ChildKind
    name: str
    digest: str = ""
    """The content digest the substrate recorded when it wrote the object (files only)."""


@dataclass(frozen=True)
class Halt:
    """The substrate can no longer run this job's pods, and says why.

    Locally: the supervisor is lost (``SupervisorLost``), the job cannot start on this
    machine (``NotRunnableLocally``) or the supervisor itself failed (``SupervisorError``).
    The substrate only reports it; the core fails the job with this reason.
    """

    reason: str
    message: str


@dataclass(frozen=True)
class Refusal:
    """The API refused to create one of the job's children (a 4xx other than "it already
    exists"): the substrate reports it, and for an application that runs as a whole the
    core judges it a failed submission (SUBMISSION_FAILED)."""

    kind: str
    """``Pod``, ``Service``, ``ConfigMap``, ... as the action named it."""
    name: str
    message: str
    """The API's own words (its status message)."""


@dataclass(frozen=True)
class ObservedProgress:
    """The latest progress report of one replica's program (:mod:`kubemill.progress`), as
    the substrate read it; the core makes the job's ``trainerStatus`` of it."""

    pod: str
    """The replica's pod name (the Plan's replica name)."""
    time: datetime
    """When the step shown was reported (the program's clock, or the reader's)."""
    step: int | None = None
    total: int | None = None
    metrics: tuple[tuple[str, float], ...] = ()
    origin: tuple[datetime, int] | None = None
    """(time, step) of the first report with a step of the program's current run (since
    the step last went down, e.g. after a restart): the speed the ETA is measured by."""


@dataclass(frozen=True)
class ObservedCondition:
    """One condition of a child controller's object, as its status has it."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    time: datetime | None = None
    """``lastTransitionTime``."""


@dataclass(frozen=True)
class ObservedController:
    """The object a replica with a child controller runs through (``ReplicaPlan.controller``;
    on Kubernetes a batch/v1 Job), its status as the substrate read it: counts of its
    pods and its conditions, no phase (the core reads the replica's state from them,
    :mod:`kubemill.core.controlled`)."""

    name: str
    """The object's name (``ChildController.name``)."""
    active: int = 0
    ready: int = 0
    succeeded: int = 0
    failed: int = 0
    conditions: tuple[ObservedCondition, ...] = ()
    created: datetime | None = None
    started: datetime | None = None
    finished: datetime | None = None
    """``completionTime`` (a failure's time is its condition's)."""
    deleting: bool = False
    uid: str = ""

    def condition(self, type_: str) -> ObservedCondition | None:
        """The condition of this type that is True (None: none is)."""
        return next((c for c in self.conditions if c.type == type_ and c.status == "True"), None)


@dataclass(frozen=True)
class Observed:
    """Everything the substrate saw of one job's children."""

    pods: tuple[ObservedPod, ...] = ()
    services: frozenset[str] = frozenset()
    pod_group: ObservedPodGroup | None = None
    halt: Halt | None = None
    """Set when the substrate cannot go on running the job (see :class:`Halt`)."""
    children: tuple[ObservedChild, ...] = ()
    refused: tuple[Refusal, ...] = ()
    """Creations the API refused since they were last asked for (see :class:`Refusal`)."""
    node_ports: tuple[tuple[str, int], ...] = ()
    """(service name, node port) of the job's NodePort services, once allocated."""
    cluster_ips: tuple[tuple[str, str], ...] = ()
    """(service name, cluster IP) of the job's services that have one, once the API server
    allocated it (not headless ones; none locally)."""
    progress: tuple[ObservedProgress, ...] = ()
    """The latest progress report of each replica that made one (locally from its file; on
    Kubernetes as its pod's sidecar sent it to the operator)."""
    remote: RemoteReport | None = None
    """What the service's API last said of the Plan's remote run (``Plan.remote``; None:
    not asked yet, or it did not answer)."""
    controllers: tuple[ObservedController, ...] = ()
    """The objects the Plan's replicas with a child controller run through (none locally,
    where such a replica is a process and reported as a pod)."""


# --- actions -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CreatePod:
    """Create the pod (start the process) of one replica of the Plan."""

    name: str


@dataclass(frozen=True)
class DeletePod:
    """Delete a pod (stop the process). ``reason`` is for events and logs."""

    name: str
    reason: str = ""


@dataclass(frozen=True)
class CreateService:
    """Create the headless service of one replica."""

    name: str


@dataclass(frozen=True)
class DeleteService:
    """Delete the headless service of one replica."""

    name: str


@dataclass(frozen=True)
class CreatePodGroup:
    """Create the gang-scheduling PodGroup for the job."""

    name: str
    min_member: int
    queue: str | None = None
    priority_class: str | None = None
    min_resources: tuple[tuple[str, str], ...] = ()
    schedule_timeout_seconds: int | None = None


@dataclass(frozen=True)
class DeletePodGroup:
    """Delete the job's PodGroup."""

    name: str


@dataclass(frozen=True)
class RenderedFile:
    """One file as the core rendered it (dynamic listings filled in)."""

    name: str
    content: str
    mode: int = 0o644
    source: FileSource | None = None
    """Content the substrate supplies (a packaged program, a generated key): see
    :class:`kubemill.frameworks.FilePlan`."""
    paths: tuple[str, ...] = ()
    """The file's names where the set is mounted (empty: ``name``)."""

    @property
    def mounted_as(self) -> tuple[str, ...]:
        return self.paths or (self.name,)


@dataclass(frozen=True)
class WriteFiles:
    """Create (or, with ``update``, rewrite in place) the files of one FileSet of the Plan.

    A ConfigMap (a Secret when ``secret``) on Kubernetes, a directory locally. ``digest``
    identifies the content; the substrate records it on the object so that the core can tell
    next time whether the content changed.
    """

    name: str
    files: tuple[RenderedFile, ...]
    digest: str
    secret: bool = False
    update: bool = False
    secret_type: str = "Opaque"  # noqa: S105 - a Secret type name, not a password


@dataclass(frozen=True)
class CreateChild:
    """Create the ServiceAccount, Role or RoleBinding of the Plan's ``access``, or one of
    its ``network_policies``."""

    kind: ChildKind
    name: str


@dataclass(frozen=True)
class DeleteChild:
    """Delete a child the Plan no longer has."""

    kind: ChildKind
    name: str


@dataclass(frozen=True)
class CreateObject:
    """Create one object of a service cluster, built whole by the framework: the Plan's
    :attr:`~kubemill.frameworks.ServiceCluster.objects` holds its body (``kind`` and
    ``name`` find it)."""

    kind: str
    name: str
    digest: str = ""
    """The digest of the body, recorded on the object (as :class:`WriteFiles` records its
    content's), so that the core can tell when the Plan's body changed."""


@dataclass(frozen=True)
class UpdateObject:
    """Rewrite one object of a service cluster whose body in the Plan changed (its recorded
    digest differs from ``digest``): a Mars cluster scaled or given other resources."""

    kind: str
    name: str
    digest: str
    stopped: bool = False
    """The cluster was stopped: the object as the Plan has it, but a Deployment with no
    replicas (its pods go; the cluster is kept to be looked at, or deleted)."""


@dataclass(frozen=True)
class SubmitRemote:
    """Submit the Plan's remote run to its service (POST ``Plan.remote.submit_body`` to its
    ``submit_path``): the service is up and does not know the run. Idempotent on the
    service's side (the body names the run), so a submission seen late is harmless."""


@dataclass(frozen=True)
class DeleteJob:
    """Delete the job itself (ttlSecondsAfterFinished passed)."""

    reason: str = "TTLExpired"


@dataclass(frozen=True)
class RecordEvent:
    """A Kubernetes-style event on the job: ``Normal`` or ``Warning``."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str


Action = (
    CreatePod
    | DeletePod
    | WriteFiles
    | CreateChild
    | DeleteChild
    | CreateObject
    | UpdateObject
    | CreateService
    | DeleteService
    | CreatePodGroup
    | DeletePodGroup
    | SubmitRemote
    | DeleteJob
    | RecordEvent
)


@dataclass(frozen=True)
class ReconcileResult:
    """What to do now, the status to record, and when to look again at the latest."""

    actions: tuple[Action, ...]
    status: JobStatus
    requeue_after: timedelta | None = None
    """Set when time alone will change the outcome (deadline, TTL)."""
