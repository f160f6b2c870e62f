"""What an engine folder declares: the :class:`Engine` record of a kind that runs pods, or
the :class:`Controller` record of a kind that creates jobs of another, and the parts they
are made of (:class:`OperatorGrant`, :class:`LocalSupport`, :class:`ServiceEngine`).

Each engine's ``entry`` module builds its record from these; :mod:`kubemill.kinds.registry`
lists the built-in entries (one line an engine) and derives everything else from them.
Pure, as the layers below it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from kubemill.api import ClusterOptions, FieldError, Job, JobStatus, KindApi
from kubemill.frameworks import Framework, Network, Plan

if TYPE_CHECKING:
    # Types only: an engine's record loads no controller's rules (a command about a job of
    # a replica-set kind never needs them).
    from kubemill.core import ControllerRules, Lifecycle


@dataclass(frozen=True)
class OperatorGrant:
    """Something the operator must be allowed to do for a kind (an RBAC rule and why).

    Every kind gets pods, services and events; a kind whose Plans deliver files, create
    per-job access or exec into pods names those resources here, and the install manifests
    grant them. (RBAC forbids granting what one does not hold, so an engine whose per-job
    Role allows ``pods/exec`` must list ``pods/exec`` for the operator too.)
    """

    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    why: str
    delegated: bool = False
    """Held only so that a per-job Role can grant it: the operator never uses it itself."""


@dataclass(frozen=True)
class LocalSupport:
    """Whether the kind runs on the local substrate, and what it needs there.

    ``env``: variables every local replica of the kind gets unless its container sets them
    (what the engine needs on one machine, never the user's business: OpenMPI as root, on
    loopback). ``adapt``: the job as this machine can run it, before it is planned (an MPI
    job in ssh mode runs in exec mode: there is no sshd here); pure, and the job as
    submitted is what is recorded. ``replan``: the framework's Plan as this machine runs
    it (a Spark application's driver runs pyspark's ``spark-submit`` instead of the image's
    entrypoint, with ports from the local :class:`Network`); pure. ``refusals``: why the
    job cannot run on this machine, given a test of whether a path exists here (relative
    paths from the job's base directory), as errors at the manifest's field paths; the
    substrate asks before anything starts.
    """

    runs: bool = True
    why_not: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    adapt: Callable[[Job], Job] | None = None
    replan: Callable[[Job, Plan, Network], Plan] | None = None
    refusals: Callable[[Job, Callable[[str], bool]], list[FieldError]] | None = None
    lifecycle: Lifecycle | None = None
    """The lifecycle of the local Plan when ``replan`` changes its shape (a service cluster
    replanned into replicas runs the replica-set rules); None: the engine's own."""

    def adapted(self, job: Job) -> Job:
        """``job`` as the local substrate plans it."""
        return self.adapt(job) if self.adapt is not None else job

    def planned(self, job: Job, plan: Plan, network: Network) -> Plan:
        """The Plan of ``job`` (already :meth:`adapted`) as the local substrate runs it."""
        return self.replan(job, plan, network) if self.replan is not None else plan

    def refused(self, job: Job, exists: Callable[[str], bool]) -> list[FieldError]:
        """Why ``job`` cannot run on this machine (empty: nothing the engine knows of)."""
        return self.refusals(job, exists) if self.refusals is not None else []


@dataclass(frozen=True)
class ServiceEngine:
    """How ``kubemill cluster create <name>`` makes a cluster of a service kind."""

    name: str
    """The engine's name on the command line (``mars``)."""
    manifest: Callable[[str, ClusterOptions], Mapping[str, Any]]
    """The kind's manifest (of that name) from the command's options."""
    addresses: Callable[[Job, JobStatus], Mapping[str, str]] | None = None
    """Where clients reach a Ready cluster beyond its endpoint, by what they are for (a
    client library's address), from its status; printed by ``cluster create``."""


@dataclass(frozen=True)
class InstallExtra:
    """Objects an engine adds to ``kubemill install`` when asked for by name
    (``--runtimes``): CRDs of its own and objects of them (defaults an administrator would
    otherwise apply), applied once their CRDs are established."""

    name: str
    """The name an install asks for it by (``runtimes``)."""
    about: str
    """One line for the command's help."""
    crds: Callable[[], Sequence[Mapping[str, Any]]]
    objects: Callable[[], Sequence[Mapping[str, Any]]]
    resources: Mapping[str, tuple[str, bool]]
    """Each kind of :attr:`objects` -> (its resource name, whether it is namespaced)."""
    known: Callable[[Mapping[str, Any], str], object] | None = None
    """Makes one object of :attr:`resources`' kinds (a manifest's dict, and where it came
    from) known: where no cluster holds it (a local run), and in the operator, which reads
    them from the cluster when the engine's grants let it list and watch them; raises
    :class:`~kubemill.api.ManifestError` at its field paths if it is invalid."""
    forget: Callable[[Mapping[str, Any]], object] | None = None
    """Forgets one object :attr:`known` made known (deleted from the cluster, or no
    longer valid there)."""


@dataclass(frozen=True)
class Referred:
    """Another job a job refers to, as the substrate sees it now: its model with its last
    status, and where the substrate reaches those of its replicas that are Running and
    ready (replica name -> address: loopback locally, the pod's IP on Kubernetes)."""

    job: Job
    addresses: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class References:
    """Jobs of another kind that a kind's jobs refer to by name in their own namespace (a
    Ray job's existing cluster, selected by name). Both substrates resolve them before every
    planning of such a job, so the framework plans from what it was handed (pure); the
    operator reconciles a job again when a job it names changes."""

    kind: str
    """The kind of the jobs referred to."""
    names: Callable[[Mapping[str, Any]], tuple[str, ...]]
    """The names a job refers to, read from its manifest (as stored: a dict)."""
    resolve: Callable[[Job, Callable[[str], Referred | None]], Job]
    """The job with what it refers to resolved, given the substrate's lookup of a job of
    :attr:`kind` by name in the job's namespace (None: there is none); pure. A job that
    refers to nothing is returned as it is."""


@dataclass(frozen=True)
class ChildPods:
    """Pods a job's own program creates (not the operator: a Spark driver's executors),
    shown on the job page as its children."""

    title: str
    """What they are, as the page heads them (``Executors``)."""
    selector: Callable[[Job], str]
    """The label selector of a job's child pods on Kubernetes."""
    local: str = ""
    """What they are on the local substrate, where there are no pods, in words."""


@dataclass(frozen=True)
class Engine:
    """One job kind, whole."""

    api: KindApi
    framework: Framework
    summary: str
    """One line for ``kubemill kinds``, the CLI's help and the docs' kinds table."""
    grants: tuple[OperatorGrant, ...] = ()
    local: LocalSupport = LocalSupport()
    lifecycle: Lifecycle | None = None
    """How the core decides for the kind's jobs (:mod:`kubemill.core.lifecycle`): pods
    one by one (None, the default: :data:`kubemill.core.REPLICA_SET`), an application run
    again as a whole, a service cluster. Ask :func:`kubemill.kinds.lifecycle_for`, which
    reads the default. (The default is not the object itself: importing any module of the
    core loads the reconciler, which a command that only loads and plans a job, such as
    ``kubemill run --detach``, never runs.)"""
    restarts: bool = True
    """Whether the kind's pods are ever restarted or recreated (counts against
    ``backoffLimit``). A kind whose runs are retried as a whole (a Spark application: pods
    ``Never`` restart, ``backoffLimit`` 0) never is, so the operator never writes the
    restart-count annotation of its upstream group and is not allowed to patch it there."""
    finishes: bool = True
    """Whether the kind's objects ever finish (Succeeded or Failed), so that the operator may
    delete one whose ``ttlSecondsAfterFinished`` passed. A service that runs until deleted
    (a Mars cluster) never does, and the operator is not allowed to delete it."""
    expires: bool = True
    """Whether a finished job of the kind may set ``ttlSecondsAfterFinished``, so that the
    operator deletes it. A kind with no such field (Kubeflow Trainer's) never
    expires, and the operator is not allowed to delete it."""
    cluster: ServiceEngine | None = None
    """Set for a service that ``kubemill cluster create`` makes (and ``cluster list``
    shows)."""
    web_ui: Callable[[Job], str] | None = None
    """Where a job's web UI serves (``host:port``) once its status says so, else "" (a
    Spark driver's UI); None for a kind without one."""
    extras: tuple[InstallExtra, ...] = ()
    """What ``kubemill install`` adds for the engine when asked (see :class:`InstallExtra`)."""
    child_pods: ChildPods | None = None
    """Pods its jobs' programs create themselves, for the job page; None for none."""
    refers: References | None = None
    """Jobs of another kind its jobs refer to (see :class:`References`); None: none."""
    scale: Callable[[Job, str | None, int], list[dict[str, Any]]] | None = None
    """The JSON patch (RFC 6902) that gives a group of a job (its current model; None: its
    only group) that many replicas, for ``kubemill scale``, touching that group's fields
    only (with a ``test`` that the group is still where the model saw it); raises
    ``ManifestError`` for a group the job has not. None: the kind's groups are not scaled
    this way."""

    @property
    def kind(self) -> str:
        return self.api.kind

    def __post_init__(self) -> None:
        if self.framework.kind != self.api.kind:
            raise ValueError(
                f"engine {self.api.kind}: its framework plans {self.framework.kind!r}, not "
                f"{self.api.kind!r}"
            )


@dataclass(frozen=True)
class ControllerListing:
    """How a list shows an object of a controller's kind, which has no replicas of its own
    (its runs are jobs of their own, listed beside it). Each field is a pure function of
    the object (its model, with its status)."""

    state: Callable[[Job], str]
    """Its one word in a job list (a schedule's ``Suspended`` while it starts no run)."""
    last_run: Callable[[Job], tuple[str, datetime | None]]
    """The name of the last run it created and when that run was due ("" and None before
    its first)."""
    columns: Callable[[Job], tuple[tuple[str, str | datetime | None], ...]]
    """The columns of the kind's own table (``kubemill get <kind>``) between NAME and
    STATE, in order, as (header, cell); a time is shown as an age, None as ``-``."""


@dataclass(frozen=True)
class Controller:
    """A kind that runs no pods of its own but creates and deletes jobs of another kind.

    ``controls`` is the kind of the jobs it creates, in the group it is served in itself;
    the operator watches them, enqueues their controller on every change, and is allowed
    to create them (and to delete them, as it may every job). Its decisions are its
    ``rules`` (:class:`kubemill.core.ControllerRules`: a Spark schedule's are
    :data:`kubemill.core.SCHEDULED_SPARK`), which both substrates run in one generic loop.
    """

    api: KindApi
    controls: str
    summary: str
    rules: ControllerRules
    local: LocalSupport = LocalSupport(runs=False)
    restarts: bool = False
    """Never: it has no pods (the field every registry entry answers)."""
    listing: ControllerListing | None = None
    """How lists show its objects beyond its status's phase (its state word, its last run,
    a table of its own); None: by their phase alone."""

    @property
    def kind(self) -> str:
        return self.api.kind


Entry = Engine | Controller
"""Any registered kind: what the loader, the CRDs, the RBAC and the kinds table read."""

__all__ = [
    "Controller",
    "ControllerListing",
    "Engine",
    "Entry",
    "InstallExtra",
    "LocalSupport",
    "OperatorGrant",
    "References",
    "Referred",
    "ServiceEngine",
]
