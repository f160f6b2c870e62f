"""The kinds kubemill runs: one registry entry per kind (an :class:`Engine`, or a
:class:`Controller` of another kind's jobs), and what derives.

Loading manifests of any registered kind, planning a job by its kind's framework, and the
CRDs all go through here; see :mod:`kubemill.kinds.registry`. A built-in kind's engine is
imported the first time the kind is asked about (``BUILTIN`` and ``CONTROLLERS``, every
record, the first time they are read).
"""

from typing import TYPE_CHECKING, Any

from kubemill.kinds.registry import (
    CONTROLLER_LINES,
    ENGINE_LINES,
    Controller,
    Engine,
    Entry,
    Line,
    LocalSupport,
    UnknownKind,
    add_known_objects,
    child_pods_of,
    controller_for,
    controllers,
    crds,
    describe,
    engine_for,
    engines,
    entries,
    entry_for,
    is_builtin,
    is_controller,
    is_service,
    kind_named,
    kind_table,
    known_object_kinds,
    lifecycle_for,
    listing_of,
    load,
    load_document,
    load_one,
    markdown_table,
    plan_for,
    register,
    registered,
    service_engines,
    status_type,
    unregister,
    web_ui_of,
)

__all__ = [
    "BUILTIN",
    "CONTROLLERS",
    "CONTROLLER_LINES",
    "ENGINE_LINES",
    "Controller",
    "ControllerListing",
    "Engine",
    "Entry",
    "Line",
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
    "is_builtin",
    "is_controller",
    "is_service",
    "kind_named",
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

if TYPE_CHECKING:
    from kubemill.engines.base import ControllerListing, OperatorGrant, ServiceEngine
    from kubemill.kinds.registry import BUILTIN, CONTROLLERS
else:

    def __getattr__(name: str) -> Any:
        """``BUILTIN`` and ``CONTROLLERS``, the built-in records, and the parts of some
        records only (:mod:`kubemill.engines.record_parts`): imported on first use."""
        if name in ("BUILTIN", "CONTROLLERS"):
            from kubemill.kinds import registry

            return getattr(registry, name)
        if name in ("ControllerListing", "OperatorGrant", "ServiceEngine"):
            from kubemill.engines import base

            return getattr(base, name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
