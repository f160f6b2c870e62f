"""The parts an engine's record may have beyond its API and planner: the grants the
operator needs for it (:class:`OperatorGrant`), how ``kubemill cluster create`` makes one of
its clusters (:class:`ServiceEngine`), what ``kubemill install`` adds for it
(:class:`InstallExtra`), the jobs of another kind it refers to (:class:`References`,
:class:`Referred`), the pods its programs create (:class:`ChildPods`), and how lists show
a controller's objects (:class:`ControllerListing`).

They live apart from :mod:`kubemill.engines.base` because every dataclass costs a compile of
its generated methods when its module is imported, and a command about one job (``kubemill
run --detach`` of a PyTorch job) reads none of them. :mod:`kubemill.engines.base` still
offers each name (loaded on first use). Pure, as the layers below it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubemill.api import ClusterOptions, Job, JobStatus


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
