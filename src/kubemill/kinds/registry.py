"""The registry: one :class:`Engine` per job kind, one :class:`Controller` per kind that
controls jobs of another, and everything derived from them.

An engine is the whole description of a kind that runs pods: its API (model, versions,
conversions and CRD: :class:`kubemill.api.KindApi`), the framework that plans it, what the
operator must be allowed to do for it, and whether it runs on the local substrate. A
controller runs no pods: it creates and deletes jobs of a kind that does (a
Spark schedule creates a Spark application at each time it is due), decided by a core
function of its own, not by a Plan. The loader's kind table, the CRDs, the install manifests
and the Helm chart, the operator's RBAC and watches, the CLI's help and ``kubemill kinds``,
and the docs' kinds table all derive from :func:`entries` (engines, then controllers);
nothing else lists kinds.

Adding an engine means: its folder, ``kubemill/engines/<engine>/`` (its API, planner, local
support and an ``entry`` module holding its record, see :mod:`kubemill.engines`), and one
line here, the import of that ``entry`` (its record listed in :data:`BUILTIN` or
:data:`CONTROLLERS`). A plugin (or a test) adds one at run time with :func:`register`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from kubemill.api import FieldError, Job, JobStatus, KindTable, ManifestError, loader
from kubemill.api import crd as crd_generation
from kubemill.core import Lifecycle
from kubemill.engines.base import (
    ChildPods,
    Controller,
    ControllerListing,
    Engine,
    Entry,
    LocalSupport,
    OperatorGrant,
    ServiceEngine,
)
from kubemill.engines.jax import entry as jax
from kubemill.engines.mars import entry as mars
from kubemill.engines.mpi import entry as mpi
from kubemill.engines.paddle import entry as paddle
from kubemill.engines.pytorch import entry as pytorch
from kubemill.engines.ray import entry as ray
from kubemill.engines.spark import entry as spark
from kubemill.engines.tensorflow import entry as tensorflow
from kubemill.engines.trainer import entry as trainer
from kubemill.engines.xgboost import entry as xgboost
from kubemill.frameworks import Network, Plan, PlanError

BUILTIN: tuple[Engine, ...] = (
    tensorflow.ENGINE,
    pytorch.ENGINE,
    mpi.ENGINE,
    spark.ENGINE,
    mars.ENGINE,
    jax.ENGINE,
    xgboost.ENGINE,
    paddle.ENGINE,
    trainer.ENGINE,
    ray.ENGINE,
    ray.JOB,
)
"""The engines kubemill ships, in the order they are listed everywhere."""


CONTROLLERS: tuple[Controller, ...] = (spark.SCHEDULE,)
"""The controllers kubemill ships, listed after the engines everywhere."""


class UnknownKind(PlanError, LookupError):
    """No engine is registered for a kind."""


_engines: dict[str, Engine] = {engine.kind: engine for engine in BUILTIN}
_controllers: dict[str, Controller] = {c.kind: c for c in CONTROLLERS}
_table: KindTable | None = None


def engines() -> tuple[Engine, ...]:
    """Every registered engine, built-ins first, in registration order."""
    return tuple(_engines.values())


def controllers() -> tuple[Controller, ...]:
    """Every controller (kinds that create jobs of another kind)."""
    return tuple(_controllers.values())


def entries() -> tuple[Entry, ...]:
    """Every registered kind: the engines, then the controllers."""
    return (*engines(), *controllers())


def entry_for(kind: str) -> Entry:
    """The engine or controller of ``kind``; :class:`UnknownKind` if none."""
    found = _controllers.get(kind)
    return found if found is not None else engine_for(kind)


def engine_for(kind: str) -> Engine:
    """The engine of ``kind``; :class:`UnknownKind` (naming the known ones) if none, or
    saying what a controller's kind is instead."""
    try:
        return _engines[kind]
    except KeyError:
        if kind in _controllers:
            controller = _controllers[kind]
            raise UnknownKind(
                f"{kind} runs no pods of its own: it creates {controller.controls}s, which "
                f"do (`kubemill get {controller.controls.lower()}s` lists them)"
            ) from None
        known = ", ".join(sorted(_engines))
        raise UnknownKind(
            f"no engine runs {kind or 'a job without a kind'!r}; kubemill runs {known}"
        ) from None


def register(entry: Entry) -> None:
    """Add an engine or a controller (a plugin's kind). Its kind must not be registered
    yet; a controller's runs must be of a registered engine's kind."""
    global _table
    if entry.kind in _engines or entry.kind in _controllers:
        raise ValueError(f"{entry.kind} is registered already")
    if isinstance(entry, Controller):
        if entry.controls not in _engines:
            raise ValueError(
                f"controller {entry.kind}: it creates {entry.controls!r}, which no "
                "registered engine runs (register that engine first)"
            )
        _controllers[entry.kind] = entry
    else:
        _engines[entry.kind] = entry
    _table = None


def unregister(kind: str) -> None:
    """Remove a kind added with :func:`register` (the built-ins stay)."""
    global _table
    if kind in {e.kind for e in BUILTIN} | {c.kind for c in CONTROLLERS}:
        raise ValueError(f"{kind} is built in and cannot be unregistered")
    _engines.pop(kind, None)
    _controllers.pop(kind, None)
    _table = None


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
    return kind in _controllers


def controller_for(kind: str) -> Controller:
    """The controller of ``kind``; :class:`UnknownKind` if it is none."""
    try:
        return _controllers[kind]
    except KeyError:
        known = ", ".join(sorted(_controllers)) or "none"
        raise UnknownKind(
            f"{kind!r} is no controller's kind; the controllers are {known}"
        ) from None


def listing_of(kind: str) -> ControllerListing | None:
    """How lists show objects of ``kind`` beyond their phase (a controller's state word,
    last run and table of its own); None for a kind that shows its phase alone."""
    controller = _controllers.get(kind)
    return None if controller is None else controller.listing


def child_pods_of(kind: str) -> ChildPods | None:
    """The pods ``kind``'s programs create themselves (a job page's children), if any."""
    engine = _engines.get(kind)
    return None if engine is None else engine.child_pods


def web_ui_of(job: Job) -> str:
    """Where ``job``'s web UI serves (``host:port``), "" when its kind has none or its
    status does not say yet."""
    engine = _engines.get(job.kind)
    return "" if engine is None or engine.web_ui is None else engine.web_ui(job)


def status_type(kind: str) -> type[JobStatus]:
    """The status model of ``kind``'s jobs (how a controller reads its runs' statuses)."""
    annotation = engine_for(kind).api.model.model_fields["status"].annotation
    if not (isinstance(annotation, type) and issubclass(annotation, JobStatus)):
        raise TypeError(f"{kind}: its model's status is {annotation!r}, not a JobStatus")
    return annotation


def is_service(kind: str) -> bool:
    """Whether jobs of ``kind`` serve until stopped (a service cluster: never finished)."""
    engine = _engines.get(kind)
    return engine is not None and not engine.finishes


def service_engines() -> dict[str, Engine]:
    """The engines ``kubemill cluster create <name>`` makes, by that name."""
    return {e.cluster.name: e for e in _engines.values() if e.cluster is not None}


def kind_table() -> KindTable:
    """The loader's view of the registered kinds."""
    global _table
    if _table is None:
        _table = KindTable(entry.api for entry in entries())
    return _table


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
    "Controller",
    "ControllerListing",
    "Engine",
    "Entry",
    "LocalSupport",
    "OperatorGrant",
    "ServiceEngine",
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
