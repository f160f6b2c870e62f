"""The job kinds as the client addresses them, and job objects as read from or sent to a cluster.

Every registered kind (:func:`kubemill.kinds.entries`) is a :class:`JobKind`:
its REST path in our group, and the names a user may write before ``/`` as with kubectl
(``tfjob/x``, ``tfj/x``, ``tfjobs.kubemill.dev/x``). :class:`Found` is one job object as the
API server returned it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubemill.api import API_VERSION, GROUP, VERSION, Job
from kubemill.kinds import entries, load_document
from kubemill.substrates.base import SubstrateError
from kubemill.substrates.kubernetes.restarts import recorded
from kubemill.substrates.kubernetes.transport import api_path
from kubemill.version import __version__

_DROPPED_METADATA = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    "ownerReferences",
)
"""Metadata a new object must not carry (the API server sets or refuses it)."""


@dataclass(frozen=True)
class JobKind:
    """One job kind of our group, as the REST API serves it."""

    kind: str
    plural: str
    names: frozenset[str]
    """What a user may write before ``/`` to name the kind (``tfjob/x``, ``tfj/x``, ...)."""

    def path(self, namespace: str | None, name: str | None = None) -> str:
        return api_path(
            group=GROUP, version=VERSION, plural=self.plural, namespace=namespace, name=name
        )

    @property
    def resource(self) -> str:
        return f"{self.plural}.{GROUP}"


def job_kinds() -> tuple[JobKind, ...]:
    """Every registered kind as the client names and finds it (read when asked, so a
    kind registered at run time is included)."""
    return tuple(
        JobKind(
            kind=entry.kind,
            plural=entry.plural,
            names=frozenset(
                n.lower()
                for n in (
                    entry.kind,
                    entry.plural,
                    entry.singular,
                    *entry.short_names,
                    f"{entry.plural}.{GROUP}",
                    f"{entry.kind}.{GROUP}",
                )
            ),
        )
        for entry in (kind.api for kind in entries())
    )


def kind_of(job: Job) -> JobKind:
    """The served kind of ``job`` (a :class:`SubstrateError` if it has no CRD)."""
    for kind in job_kinds():
        if kind.kind == job.KIND:
            return kind
    raise SubstrateError(
        f"{job.KIND} is not a registered kind, so it has no CRD to run on Kubernetes"
    )


def split_name(name: str) -> tuple[tuple[JobKind, ...], str]:
    """``name`` or ``kind/name`` (kubectl style) -> the kinds to look in and the name."""
    if "/" not in name:
        return job_kinds(), name
    prefix, _, rest = name.partition("/")
    chosen = tuple(k for k in job_kinds() if prefix.lower() in k.names)
    if not chosen or not rest:
        known = ", ".join(f"{k.kind.lower()}/NAME" for k in job_kinds())
        raise SubstrateError(f"cannot tell which job {name!r} means: write NAME or one of {known}")
    return chosen, rest


def load_job(raw: Mapping[str, Any]) -> Job:
    """The job model of an object read from the cluster (status included, with the restart
    counts of an upstream-group job read back from their annotation, as the operator does)."""
    job, errors = load_document(recorded(raw))
    if job is None or errors:
        meta = raw.get("metadata") or {}
        where = f"{raw.get('kind')} {meta.get('namespace')}/{meta.get('name')}"
        problems = "; ".join(str(e) for e in errors) or "it does not load"
        raise SubstrateError(
            f"{where} in the cluster is not a job this kubemill ({__version__}) understands: "
            f"{problems}; was it written by another version? `kubectl get "
            f"{str(raw.get('kind', '')).lower()} {meta.get('name')} -o yaml` shows it"
        )
    return job


def job_body(job: Job, namespace: str) -> dict[str, Any]:
    """The object ``submit`` creates: the (defaulted) manifest in our group, no status."""
    body = job.to_wire()
    body.pop("status", None)
    body["apiVersion"] = API_VERSION
    body["kind"] = job.KIND
    meta = body.setdefault("metadata", {})
    for key in _DROPPED_METADATA:
        meta.pop(key, None)
    meta["namespace"] = namespace
    return body


@dataclass
class Found:
    """A job object as the API server returned it."""

    kind: JobKind
    raw: dict[str, Any]

    @property
    def namespace(self) -> str:
        return str(self.raw["metadata"]["namespace"])

    @property
    def name(self) -> str:
        return str(self.raw["metadata"]["name"])

    @property
    def uid(self) -> str:
        return str(self.raw["metadata"].get("uid") or "")

    def job(self) -> Job:
        return load_job(self.raw)
