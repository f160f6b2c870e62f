"""What an engine folder declares: the :class:`Engine` record of a kind that runs pods, or
the :class:`Controller` record of a kind that creates jobs of another, and the parts they
are made of (:class:`OperatorGrant`, :class:`LocalSupport`, :class:`ServiceEngine`).

Each engine's ``entry`` module builds its record from these; :mod:`kubemill.kinds.registry`
lists the built-in entries (one line an engine) and derives everything else from them.
Pure, as the layers below it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubemill.api import FieldError, Job, KindApi
from kubemill.frameworks import Framework, Network, Plan

if TYPE_CHECKING:
    # Types only: an engine's record loads no controller's rules (a command about a job of
    # a replica-set kind never needs them). The parts of some records only are offered
    # here too (:data:`__all__`), loaded on first use (:func:`__getattr__`; see
    # :mod:`kubemill.engines.record_parts`).
    from kubemill.core import ControllerRules, Lifecycle
    from kubemill.engines.record_parts import (
        ChildPods,
        ControllerListing,
        InstallExtra,
        OperatorGrant,
        References,
        Referred,
        ServiceEngine,
    )


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
    "ChildPods",
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


if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        """A name of :mod:`kubemill.engines.record_parts` (the names in ``__all__`` not
        defined here), imported now (once). Any other name (``__path__``, which every
        ``from ... import`` asks for) is not there: it must not load them."""
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from kubemill.engines import record_parts

        value = getattr(record_parts, name)
        globals()[name] = value
        return value
