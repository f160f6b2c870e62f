"""The registry: one line per built-in kind, the :class:`Engine` of a kind that runs pods or
the :class:`Controller` of a kind that controls jobs of another, and everything derived from
them.

An engine is the whole description of a kind that runs pods: its API (model, versions,
conversions and CRD: :class:`kubemill.api.KindApi`), the framework that plans it, what the
operator must be allowed to do for it, and whether it runs on the local substrate. A
controller runs no pods: it creates and deletes jobs of a kind that does (a
Spark schedule creates a Spark application at each time it is due), decided by a core
function of its own, not by a Plan. The loader's kind table, the CRDs, the install manifests
and the Helm chart, the operator's RBAC and watches, the CLI's help and ``kubemill kinds``,
and the docs' kinds table all derive from :func:`entries` (engines, then controllers);
nothing else lists kinds.

A built-in kind's line (:class:`Line`) holds what finds it without importing it: its kind in
lower case (the CRD's singular name) and where its record is. The record, and with it the
engine's models and planner, is imported the first time the kind is asked about, so a
command about one job loads that job's engine alone (``kubemill run`` of a PyTorch job
imports no other engine's models); whatever lists every kind (:func:`entries`, the CRDs,
``kubemill kinds``, an error naming the known kinds) imports them all.

Adding an engine means: its folder, ``kubemill/engines/<engine>/`` (its API, planner, local
support and an ``entry`` module holding its record, see :mod:`kubemill.engines`), and one
line here, in :data:`ENGINE_LINES` (or :data:`CONTROLLER_LINES`): its kind's singular name
and its ``entry`` module. A plugin (or a test) adds a record at run time with
:func:`register`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

from kubemill.api import (
    GROUP,
    ApiVersion,
    FieldError,
    Job,
    JobStatus,
    KindTable,
    ManifestError,
    loader,
)
from kubemill.api import crd as crd_generation
from kubemill.engines.base import Controller, Engine, Entry, LocalSupport
from kubemill.frameworks import Network, Plan, PlanError


@dataclass(frozen=True)
class Line:
    """A built-in kind's line: enough to find it by its kind without importing its engine.

    ``singular`` is the kind in lower case, as its CRD's ``names.singular`` (a manifest's
    ``kind`` is looked up by it, and the record found must be of that very kind);
    ``entry`` is ``module:attribute`` of its record in its engine's folder.
    """

    singular: str
    entry: str

    def record(self) -> Entry:
        """The record this line points at, imported now (once: the module stays loaded)."""
        found = _records.get(self)
        if found is not None:
            return found
        module, _, attribute = self.entry.partition(":")
        record = getattr(importlib.import_module(module), attribute)
        if not isinstance(record, Engine | Controller) or record.api.singular != self.singular:
            raise TypeError(f"registry line {self}: {record!r} is not the record of its kind")
        _records[self] = record
        return record


ENGINE_LINES: tuple[Line, ...] = (
    Line("tfjob", "kubemill.engines.tensorflow.entry:ENGINE"),
    Line("pytorchjob", "kubemill.engines.pytorch.entry:ENGINE"),
    Line("mpijob", "kubemill.engines.mpi.entry:ENGINE"),
    Line("sparkapplication", "kubemill.engines.spark.entry:ENGINE"),
    Line("marscluster", "kubemill.engines.mars.entry:ENGINE"),
    Line("jaxjob", "kubemill.engines.jax.entry:ENGINE"),
    Line("xgboostjob", "kubemill.engines.xgboost.entry:ENGINE"),
    Line("paddlejob", "kubemill.engines.paddle.entry:ENGINE"),
    Line("trainjob", "kubemill.engines.trainer.entry:ENGINE"),
    Line("raycluster", "kubemill.engines.ray.entry:ENGINE"),
    Line("rayjob", "kubemill.engines.ray.entry:JOB"),
)
"""The engines kubemill ships, in the order they are listed everywhere."""


CONTROLLER_LINES: tuple[Line, ...] = (
    Line("scheduledsparkapplication", "kubemill.engines.spark.entry:SCHEDULE"),
)
"""The controllers kubemill ships, listed after the engines everywhere."""


if TYPE_CHECKING:
    from kubemill.core import Lifecycle
    from kubemill.engines.base import ChildPods, ControllerListing

    BUILTIN: tuple[Engine, ...]
    """The built-in engines' records, in :data:`ENGINE_LINES`' order (imports them all)."""
    CONTROLLERS: tuple[Controller, ...]
    """The built-in controllers' records (imports them)."""
else:

    def __getattr__(name: str) -> Any:
        """``BUILTIN`` and ``CONTROLLERS``: every built-in record, imported on first use."""
        if name == "BUILTIN":
            return _builtin_engines()
        if name == "CONTROLLERS":
            return _builtin_controllers()
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class UnknownKind(PlanError, LookupError):
    """No engine is registered for a kind."""


_records: dict[Line, Entry] = {}
"""The records of the lines asked about so far."""
_ENGINE_LINES = {line.singular: line for line in ENGINE_LINES}
_CONTROLLER_LINES = {line.singular: line for line in CONTROLLER_LINES}
_engines: dict[str, Engine] = {}
"""Engines registered at run time (plugins), by kind."""
_controllers: dict[str, Controller] = {}
"""Controllers registered at run time, by kind."""


@cache  # the built-ins never change: listed once, every later list is the same tuple
def _builtin_engines() -> tuple[Engine, ...]:
    return tuple(_engine_of(line) for line in ENGINE_LINES)


@cache
def _builtin_controllers() -> tuple[Controller, ...]:
    return tuple(_controller_of(line) for line in CONTROLLER_LINES)


def _engine_of(line: Line) -> Engine:
    record = line.record()
    if not isinstance(record, Engine):
        raise TypeError(f"registry line {line}: {record.kind} is no engine")
    return record


def _controller_of(line: Line) -> Controller:
    record = line.record()
    if not isinstance(record, Controller):
        raise TypeError(f"registry line {line}: {record.kind} is no controller")
    return record


def _find_engine(kind: str) -> Engine | None:
    """The engine of exactly ``kind``, importing a built-in one's record only."""
    line = _ENGINE_LINES.get(kind.lower())
    if line is not None and (engine := _engine_of(line)).kind == kind:
        return engine
    return _engines.get(kind)


def _find_controller(kind: str) -> Controller | None:
    """The controller of exactly ``kind``, importing a built-in one's record only."""
    line = _CONTROLLER_LINES.get(kind.lower())
    if line is not None and (controller := _controller_of(line)).kind == kind:
        return controller
    return _controllers.get(kind)


def engines() -> tuple[Engine, ...]:
    """Every registered engine, built-ins first, in registration order."""
    return (*_builtin_engines(), *_engines.values())


def controllers() -> tuple[Controller, ...]:
    """Every controller (kinds that create jobs of another kind)."""
    return (*_builtin_controllers(), *_controllers.values())


def entries() -> tuple[Entry, ...]:
    """Every registered kind: the engines, then the controllers."""
    return (*engines(), *controllers())


def kind_named(name: str) -> str | None:
    """The registered kind ``name`` names as kubectl takes it (``tfjobs``, ``tfjob``, ``tfj``,
    the kind's own name in any case, qualified by kubemill's group or an upstream one the kind
    is accepted in: ``tfjobs.kubemill.dev``, ``rayclusters.ray.io``), or None."""
    wanted = name.lower()
    for entry in entries():
        api = entry.api
        groups = (GROUP, *(group for group, _ in api.upstream_groups))
        if any(wanted in api.names(group) for group in groups):
            return entry.kind
    return None


def entry_for(kind: str) -> Entry:
    """The engine or controller of ``kind``; :class:`UnknownKind` if none."""
    found = _find_controller(kind)
    return found if found is not None else engine_for(kind)


def engine_for(kind: str) -> Engine:
    """The engine of ``kind``; :class:`UnknownKind` (naming the known ones) if none, or
    saying what a controller's kind is instead."""
    engine = _find_engine(kind)
    if engine is not None:
        return engine
    controller = _find_controller(kind)
    if controller is not None:
        raise UnknownKind(
            f"{kind} runs no pods of its own: it creates {controller.controls}s, which "
            f"do (`kubemill get {controller.controls.lower()}s` lists them)"
        )
    known = ", ".join(sorted(e.kind for e in engines()))
    raise UnknownKind(f"no engine runs {kind or 'a job without a kind'!r}; kubemill runs {known}")


def register(entry: Entry) -> None:
    """Add an engine or a controller (a plugin's kind). Its kind must not be registered
    yet; a controller's runs must be of a registered engine's kind."""
    if _find_engine(entry.kind) is not None or _find_controller(entry.kind) is not None:
        raise ValueError(f"{entry.kind} is registered already")
    if isinstance(entry, Controller):
        if _find_engine(entry.controls) is None:
            raise ValueError(
                f"controller {entry.kind}: it creates {entry.controls!r}, which no "
                "registered engine runs (register that engine first)"
            )
        _controllers[entry.kind] = entry
    else:
        _engines[entry.kind] = entry


def unregister(kind: str) -> None:
    """Remove a kind added with :func:`register` (the built-ins stay)."""
    if is_builtin(kind):
        raise ValueError(f"{kind} is built in and cannot be unregistered")
    _engines.pop(kind, None)
    _controllers.pop(kind, None)


def is_builtin(kind: str) -> bool:
    """Whether ``kind`` is one of kubemill's own (a line here), not a plugin's."""
    line = _ENGINE_LINES.get(kind.lower()) or _CONTROLLER_LINES.get(kind.lower())
    return line is not None and line.record().kind == kind


_E = TypeVar("_E", Engine, Controller)


@contextmanager
def registered(entry: _E) -> Iterator[_E]:
    """Register ``entry`` for the duration of a ``with`` block (tests, one-off plugins)."""
    register(entry)
    try:
        yield entry
    finally:
        unregister(entry.kind)


def is_controller(kind: str) -> bool:
    """Whether ``kind`` is a controller's: it creates jobs of another kind, runs no pods."""
    return _find_controller(kind) is not None


def controller_for(kind: str) -> Controller:
    """The controller of ``kind``; :class:`UnknownKind` if it is none."""
    controller = _find_controller(kind)
    if controller is not None:
        return controller
    known = ", ".join(sorted(c.kind for c in controllers())) or "none"
    raise UnknownKind(f"{kind!r} is no controller's kind; the controllers are {known}")


def listing_of(kind: str) -> ControllerListing | None:
    """How lists show objects of ``kind`` beyond their phase (a controller's state word,
    last run and table of its own); None for a kind that shows its phase alone."""
    controller = _find_controller(kind)
    return None if controller is None else controller.listing


def child_pods_of(kind: str) -> ChildPods | None:
    """The pods ``kind``'s programs create themselves (a job page's children), if any."""
    engine = _find_engine(kind)
    return None if engine is None else engine.child_pods


def web_ui_of(job: Job) -> str:
    """Where ``job``'s web UI serves (``host:port``), "" when its kind has none or its
    status does not say yet."""
    engine = _find_engine(job.kind)
    return "" if engine is None or engine.web_ui is None else engine.web_ui(job)


def status_type(kind: str) -> type[JobStatus]:
    """The status model of ``kind``'s jobs (how a controller reads its runs' statuses)."""
    annotation = engine_for(kind).api.model.model_fields["status"].annotation
    if not (isinstance(annotation, type) and issubclass(annotation, JobStatus)):
        raise TypeError(f"{kind}: its model's status is {annotation!r}, not a JobStatus")
    return annotation


def is_service(kind: str) -> bool:
    """Whether jobs of ``kind`` serve until stopped (a service cluster: never finished)."""
    engine = _find_engine(kind)
    return engine is not None and not engine.finishes


def service_engines() -> dict[str, Engine]:
    """The engines ``kubemill cluster create <name>`` makes, by that name."""
    return {e.cluster.name: e for e in engines() if e.cluster is not None}


class _RegisteredKinds(KindTable):
    """The loader's view of the registered kinds, asked each time: a document's kind is
    found by its line, so loading a job imports that job's engine alone; listing the
    kinds (an unknown kind's hint) imports every engine."""

    def __init__(self) -> None:
        super().__init__(())

    def entry(self, api_version: str, kind: str) -> ApiVersion | None:
        found = _find_controller(kind) or _find_engine(kind)
        return None if found is None else found.api.accepted().get(api_version)

    def kind_names(self) -> list[str]:
        return KindTable(entry.api for entry in entries()).kind_names()

    def versions_of(self, kind: str) -> list[str]:
        found = _find_controller(kind) or _find_engine(kind)
        return [] if found is None else sorted(found.api.accepted())


_TABLE = _RegisteredKinds()


def kind_table() -> KindTable:
    """The loader's view of the registered kinds."""
    return _TABLE


def load(
    source: str | Mapping[str, Any] | Sequence[Mapping[str, Any]], *, name: str = ""
) -> list[Job]:
    """Every job in ``source`` (YAML text, one dict or a list of dicts), of any registered kind.

    Raises :class:`~kubemill.api.ManifestError` with every problem and its field path.
    """
    return loader.load(source, kinds=kind_table(), name=name)


def load_one(source: str | Mapping[str, Any], *, name: str = "") -> Job:
    """The one job in ``source``."""
    return loader.load_one(source, kinds=kind_table(), name=name)


def load_document(doc: Any) -> tuple[Job | None, list[FieldError]]:
    """One document: the job, or the errors found (never raises)."""
    return loader.load_document(doc, kinds=kind_table())


def known_object_kinds() -> dict[str, Callable[[Mapping[str, Any], str], object]]:
    """The kinds of objects an engine's install extra can make known without a cluster
    (:attr:`~kubemill.engines.base.InstallExtra.known`), each with how."""
    return {
        kind: extra.known
        for engine in engines()
        for extra in engine.extras
        if extra.known is not None
        for kind in extra.resources
    }


def add_known_objects(docs: Sequence[Any], *, source: str = "") -> int:
    """Make every object of ``docs`` known (a training runtime a local job may name): each
    by the extra of its kind; :class:`~kubemill.api.ManifestError` naming every problem,
    the kinds taken when one is of another. Returns how many were added."""
    if not docs:
        return 0  # nothing to take: no engine need be imported to say so
    takers = known_object_kinds()
    errors: list[FieldError] = []
    for doc in docs:
        kind = doc.get("kind") if isinstance(doc, Mapping) else None
        taker = takers.get(kind) if isinstance(kind, str) else None
        if taker is None:
            errors.append(
                FieldError(
                    "kind", f"{kind!r} is not a kind kubemill keeps", ", ".join(takers), source
                )
            )
            continue
        try:
            taker(doc, source)
        except ManifestError as exc:
            errors.extend(exc.errors)
    if errors:
        raise ManifestError(errors)
    return len(docs)


def plan_for(job: Job, network: Network) -> Plan:
    """The Plan of ``job`` by its kind's framework, with addresses from ``network``."""
    return engine_for(job.KIND).framework.plan(job, network)


def lifecycle_for(kind: str, *, local: bool = False) -> Lifecycle:
    """The lifecycle the core decides ``kind``'s jobs by (``local``: on the local
    substrate, where the engine's replanned Plan may have another shape)."""
    engine = engine_for(kind)
    if local and engine.local.lifecycle is not None:
        return engine.local.lifecycle
    if engine.lifecycle is None:
        # Imported here: any module of the core loads the whole reconciler, which what only
        # loads or plans a job (`kubemill run --detach`, validate, render) never runs.
        from kubemill.core import REPLICA_SET

        return REPLICA_SET
    return engine.lifecycle


def describe(engine: Entry) -> dict[str, str]:
    """One kind as the docs' table and ``kubemill kinds`` show it, column by column."""
    api = engine.api
    return {
        "kind": engine.kind,
        "short names": ", ".join(api.short_names),
        "apiVersions": ", ".join(api.accepted()),
        "Kubernetes": f"{api.plural}.kubemill.dev",
        "local": "yes" if engine.local.runs else f"no: {engine.local.why_not}",
        "what": engine.summary,
    }


def markdown_table() -> str:
    """The docs' kinds table (``docs/kinds.md``), generated from the registry."""
    rows = [describe(entry) for entry in entries()]
    header = list(rows[0]) if rows else []
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row.values()) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def crds() -> list[dict[str, Any]]:
    """The CRD of every registered kind, in registry order."""
    return crd_generation.crds(entry.api for entry in entries())


__all__ = [
    "BUILTIN",
    "CONTROLLERS",
    "CONTROLLER_LINES",
    "ENGINE_LINES",
    "Controller",
    "Engine",
    "Entry",
    "Line",
    "LocalSupport",
    "UnknownKind",
    "add_known_objects",
    "child_pods_of",
    "controller_for",
    "controllers",
    "crds",
    "describe",
    "engine_for",
    "engines",
    "entries",
    "entry_for",
    "is_builtin",
    "is_controller",
    "is_service",
    "kind_table",
    "known_object_kinds",
    "lifecycle_for",
    "listing_of",
    "load",
    "load_document",
    "load_one",
    "markdown_table",
    "plan_for",
    "register",
    "registered",
    "service_engines",
    "status_type",
    "unregister",
    "web_ui_of",
]
