"""The kinds kubemill runs: one registry entry per kind (an :class:`Engine`, or a
:class:`Controller` of another kind's jobs), and what derives.

Loading manifests of any registered kind, planning a job by its kind's framework, and the
CRDs all go through here; see :mod:`kubemill.kinds.registry`.
"""

from kubemill.kinds.registry import (
    BUILTIN,
    CONTROLLERS,
    Controller,
    Engine,
    Entry,
    LocalSupport,
    OperatorGrant,
    UnknownKind,
    controllers,
    crds,
    describe,
    engine_for,
    engines,
    entries,
    entry_for,
    kind_table,
    lifecycle_for,
    load,
    load_document,
    load_one,
    markdown_table,
    plan_for,
    register,
    registered,
    unregister,
)

__all__ = [
    "BUILTIN",
    "CONTROLLERS",
    "Controller",
    "Engine",
    "Entry",
    "LocalSupport",
    "OperatorGrant",
    "UnknownKind",
    "controllers",
    "crds",
    "describe",
    "engine_for",
    "engines",
    "entries",
    "entry_for",
    "kind_table",
    "lifecycle_for",
    "load",
    "load_document",
    "load_one",
    "markdown_table",
    "plan_for",
    "register",
    "registered",
    "unregister",
]
