"""The job kinds as the client addresses them, and job objects as read from or sent to a cluster.

Every registered kind (:func:`kubemill.kinds.entries`) is a :class:`JobKind` in our group
(:func:`job_kinds`) and one more in each upstream group its engine lists
(:func:`upstream_kinds`: the groups an operator started with ``--serve-upstream-groups``
serves, read from the registry, never written here): its REST path in that group, and the
names a user may write before ``/`` as with kubectl (``tfjob/x``, ``tfj/x``,
``tfjobs.kubemill.dev/x``; a name qualified with a group means that group only).
:class:`Found` is one job object as the API server returned it, with the kind (and so the
group) it was found in: every later request for it goes to that group.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubemill.api import API_VERSION, GROUP, VERSION, Job
from kubemill.kinds import entries, load_document
from kubemill.substrates.base import SubstrateError
from kubemill.substrates.kubernetes.client.errors import Request
from kubemill.substrates.kubernetes.restarts import recorded
from kubemill.substrates.kubernetes.transport import api_path
from kubemill.version import __version__

if TYPE_CHECKING:
    from kubemill.api import KindApi

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
    """One job kind in one API group (ours, or an upstream one), as the REST API serves it."""

    kind: str
    plural: str
    names: frozenset[str]
    """What a user may write before ``/`` to name the kind (``tfjob/x``, ``tfj/x``, ...)."""
    group: str = GROUP
    version: str = VERSION

    def path(self, namespace: str | None, name: str | None = None) -> str:
        return api_path(
            group=self.group,
            version=self.version,
            plural=self.plural,
            namespace=namespace,
            name=name,
        )

    @property
    def resource(self) -> str:
        return f"{self.plural}.{self.group}"

    def request_for(
        self, verb: str, namespace: str | None = None, name: str | None = None
    ) -> Request:
        """A request for jobs of this kind, as the API's errors name it (``get
        rayclusters.ray.io NAME in namespace "ml"``)."""
        return Request(verb, self.plural, self.group, namespace, name)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def ours(self) -> bool:
        """Whether this is kubemill's own group (the one ``submit`` creates in)."""
        return self.group == GROUP


def _job_kind(api: KindApi, group: str, version: str) -> JobKind:
    return JobKind(
        kind=api.kind, plural=api.plural, names=api.names(group), group=group, version=version
    )


def job_kinds() -> tuple[JobKind, ...]:
    """Every registered kind in our group, as the client names and finds it (read when
    asked, so a kind registered at run time is included)."""
    return tuple(_job_kind(entry.api, GROUP, VERSION) for entry in entries())


def upstream_kinds() -> tuple[JobKind, ...]:
    """Every registered kind in each upstream group its engine lists (``kubeflow.org/v1``
    and the others of ``KindApi.upstream``), group after group in registry order, as the
    operator serves them with ``--serve-upstream-groups``. Whether a cluster serves a group
    is the cluster's discovery's to say (see the backend)."""
    groups = dict.fromkeys(g for entry in entries() for g in entry.api.upstream_groups)
    return tuple(
        _job_kind(entry.api, group, version)
        for group, version in groups
        for entry in entries()
        if (group, version) in entry.api.upstream_groups
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
    """``name`` or ``kind/name`` (kubectl style) -> the kinds to look in and the name.

    The kinds are in our group first, then in the upstream groups (:func:`upstream_kinds`);
    a prefix qualified with a group (``rayclusters.ray.io/x``) chooses that group only."""
    every = (*job_kinds(), *upstream_kinds())
    if "/" not in name:
        return every, name
    prefix, _, rest = name.partition("/")
    chosen = tuple(k for k in every if prefix.lower() in k.names)
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
    """The object ``submit`` creates: the (defaulted) manifest in our group, no status.

    A manifest written in an upstream group (``kubeflow.org/v1``) is created in ours too: it
    loads unchanged into the same model, our group is served wherever kubemill is installed
    (an upstream group only with ``--serve-upstream-groups``), and ``get``/``delete`` find
    it there first."""
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
    """A job object as the API server returned it, from the group of ``kind`` (where every
    later request for it goes)."""

    kind: JobKind
    raw: dict[str, Any]
    _job: Job | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def namespace(self) -> str:
        return str(self.raw["metadata"]["namespace"])

    @property
    def name(self) -> str:
        return str(self.raw["metadata"]["name"])

    @property
    def uid(self) -> str:
        return str(self.raw["metadata"].get("uid") or "")

    def request_for(self, verb: str) -> Request:
        """A request for this very object (``get``, ``patch``, ``delete``)."""
        return self.kind.request_for(verb, self.namespace, self.name)

    def job(self) -> Job:
        """The job model of ``raw``, loaded once: a listing's filter, the replicas' plan and
        the view each read it, and a load validates the whole object. It says the group and
        version it was found in (a ``ray.io/v1`` object is shown as one), where a manifest
        loads as kubemill's own."""
        if self._job is None:
            self._job = load_job(self.raw)
            self._job.api_version = self.kind.api_version
        return self._job
