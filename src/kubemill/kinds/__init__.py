"""The kinds kubemill runs: one registry entry (:class:`Engine`) per kind, and what derives.

Loading manifests of any registered kind, planning a job by its kind's framework, and the
CRDs all go through here; see :mod:`kubemill.kinds.registry`.
"""

from kubemill.kinds.registry import (
    BUILTIN,
    Engine,
    LocalSupport,
    OperatorGrant,
    UnknownKind,
    crds,
    describe,
    engine_for,
    engines,
    kind_table,
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
    "Engine",
    "LocalSupport",
    "OperatorGrant",
    "UnknownKind",
    "crds",
    "describe",
    "engine_for",
    "engines",
    "kind_table",
    "load",
    "load_document",
    "load_one",
    "markdown_table",
    "plan_for",
    "register",
    "registered",
    "unregister",
]
