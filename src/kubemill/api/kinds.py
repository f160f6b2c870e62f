"""What one job kind is at the API level: its model, versions, conversions and CRD.

A :class:`KindApi` is the API half of a kind's registry entry (the other half, the planner,
RBAC and local support, is :class:`kubemill.kinds.Engine`). Each kind's API module defines
its own (``TFJOB`` in :mod:`.tensorflow`, ``PYTORCHJOB`` in :mod:`.pytorch`); nothing here
lists kinds. The loader and CRD generation take a :class:`KindTable` built from whatever
kinds are registered, so a new kind needs no edit in this package beyond its own module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from kubemill.api.common import API_VERSION, Job
from kubemill.api.errors import FieldError

Converter = Callable[[Any], tuple[Job | None, list[FieldError]]]
"""Turns a validated older-version model into the current job, or says why it cannot."""
PathRemap = Callable[[Any, str], str]
"""Maps a field path of the converted job back onto the manifest the user wrote."""


@dataclass(frozen=True)
class ApiVersion:
    """How one accepted ``apiVersion`` of a kind is read."""

    model: type[BaseModel]
    convert: Converter | None = None
    """None when ``model`` is the current job model itself."""
    remap: PathRemap | None = None


@dataclass(frozen=True)
class PrinterColumn:
    """One ``kubectl get`` column of a CRD."""

    name: str
    json_path: str
    type: str = "string"
    description: str = ""
    priority: int = 0

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.type, "jsonPath": self.json_path}
        if self.description:
            out["description"] = self.description
        if self.priority:
            out["priority"] = self.priority
        return out


@dataclass(frozen=True)
class ScaleSubresource:
    """Where the scale subresource finds replicas (``kubectl scale``, autoscalers)."""

    spec_replicas_path: str
    status_replicas_path: str
    label_selector_path: str | None = None

    def to_wire(self) -> dict[str, Any]:
        out = {
            "specReplicasPath": self.spec_replicas_path,
            "statusReplicasPath": self.status_replicas_path,
        }
        if self.label_selector_path:
            out["labelSelectorPath"] = self.label_selector_path
        return out


STATE_COLUMN = PrinterColumn(
    "State", ".status.conditions[-1:].type", description="The job's latest condition"
)
AGE_COLUMN = PrinterColumn("Age", ".metadata.creationTimestamp", type="date")


@dataclass(frozen=True)
class KindApi:
    """A job kind's API: its model, the versions it loads from, and its CRD."""

    model: type[Job]
    """The current model (``kubemill.dev/v1``); the CRD schema is generated from it."""
    plural: str
    short_names: tuple[str, ...] = ()
    upstream: tuple[str, ...] = ()
    """Upstream ``apiVersion``s whose manifests load unchanged into ``model``
    (``kubeflow.org/v1``); the operator serves them with ``--serve-upstream-groups``."""
    legacy: Mapping[str, ApiVersion] = field(default_factory=dict)
    """Older ``apiVersion``s, converted on load (the seed's ``kubeflow.org/v1alpha1`` TensorFlow
    jobs)."""
    categories: tuple[str, ...] = ("kubemill", "all")
    """``kubectl get kubemill`` lists every kubemill job; ``all`` adds them to ``get all``."""
    printer_columns: tuple[PrinterColumn, ...] = (STATE_COLUMN, AGE_COLUMN)
    scale: ScaleSubresource | None = None
    required: tuple[str, ...] = ("spec",)
    """Root fields the object must have."""
    schema_overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Dotted schema path -> keywords merged into that node (a ``None`` value deletes one).

    For what a model accepts that its JSON schema cannot say, e.g. a field whose
    ``mode="before"`` validator also takes an int. ``*`` steps into a map's values.
    """

    @property
    def kind(self) -> str:
        return self.model.KIND

    @property
    def singular(self) -> str:
        return self.kind.lower()

    def names(self, group: str) -> frozenset[str]:
        """What a user may write before ``/`` to name this kind in ``group``, lower-cased,
        as kubectl takes it (``tfjob/x``, ``tfjobs/x``, ``tfj/x``, ``tfjobs.kubeflow.org/x``)."""
        plain = (self.kind, self.plural, self.singular, *self.short_names)
        qualified = (f"{n}.{group}" for n in (self.kind, self.plural, self.singular))
        return frozenset(n.lower() for n in (*plain, *qualified))

    @property
    def upstream_groups(self) -> tuple[tuple[str, str], ...]:
        """``(group, version)`` of each upstream apiVersion."""
        return tuple(
            (group, version) for group, _, version in (v.partition("/") for v in self.upstream)
        )

    def accepted(self) -> dict[str, ApiVersion]:
        """Every apiVersion this kind loads from, and how."""
        current = ApiVersion(self.model)
        return {
            API_VERSION: current,
            **dict.fromkeys(self.upstream, current),
            **self.legacy,
        }


class KindTable:
    """The kinds a loader accepts: ``(apiVersion, kind)`` -> how to read it."""

    def __init__(self, kinds: Iterable[KindApi]) -> None:
        self.kinds: tuple[KindApi, ...] = tuple(kinds)
        self._entries = {
            (version, kind.kind): entry
            for kind in self.kinds
            for version, entry in kind.accepted().items()
        }

    def entry(self, api_version: str, kind: str) -> ApiVersion | None:
        """How to read this (apiVersion, kind), or None if it is not accepted."""
        return self._entries.get((api_version, kind))

    def kind_names(self) -> list[str]:
        """Every kind, sorted."""
        return sorted({kind.kind for kind in self.kinds})

    def versions_of(self, kind: str) -> list[str]:
        """Every apiVersion accepted for ``kind``, sorted."""
        return sorted(version for version, name in self._entries if name == kind)


__all__ = [
    "AGE_COLUMN",
    "STATE_COLUMN",
    "ApiVersion",
    "Converter",
    "KindApi",
    "KindTable",
    "PathRemap",
    "PrinterColumn",
    "ScaleSubresource",
]
