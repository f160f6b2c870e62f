"""Finding a job by name, and listing jobs, in every API group it could be in.

A job is looked for in kubemill's group first and, when no kind there has the name, in the
upstream groups the cluster serves (an operator started with ``--serve-upstream-groups``
serves each engine's: the groups come from the registry, see :func:`.kinds.upstream_kinds`).
Which groups the cluster serves is its discovery's to say (``GET /apis``), read once for
the :class:`JobLookup`'s life and only when an upstream group is needed. A listing covers
our group and every served upstream one. What is found is a :class:`~.kinds.Found` carrying
its kind in its group: every later request for it goes there.
"""

from __future__ import annotations

from collections.abc import Iterable

from kubemill.api import GROUP, VERSION
from kubemill.substrates.base import JobNotFound, SubstrateError
from kubemill.substrates.kubernetes.client.connection import Http
from kubemill.substrates.kubernetes.client.errors import CRDsNotInstalled, KubeApiError, Request
from kubemill.substrates.kubernetes.client.kinds import (
    Found,
    JobKind,
    job_kinds,
    split_name,
    upstream_kinds,
)


class JobLookup:
    """Jobs found by name and listed through ``http``, on the cluster at ``server``."""

    def __init__(self, http: Http, server: str) -> None:
        self.http = http
        self.server = server
        self._group_versions: frozenset[str] | None = None
        """The ``group/version``s the cluster serves (its discovery, read once when needed)."""

    def find(self, name: str, namespace: str) -> Found:
        """The job ``name`` (``NAME`` or ``kind/NAME``) of ``namespace``: looked for in
        every kind it could be in our group, and only if none has it, in the upstream
        groups the cluster serves (its discovery is read then, once).

        A name in our group is that job, whatever another tool created upstream under the
        same name (of its kind or another): ours is where ``submit`` creates jobs, so a name
        kubemill gave keeps meaning the same object, and finding it costs what it did
        before upstream groups were served. The upstream one is reached by qualifying the
        name with its group (``PLURAL.GROUP/NAME``, as with kubectl). Jobs of different
        kinds sharing the name within the groups looked in are an error naming each.
        """
        candidates, bare = split_name(name)
        asked = tuple(k for k in candidates if k.ours)
        found, missing = self._look(asked, namespace, bare)
        forbidden: list[JobKind] = []
        if not found:
            upstream = self._served(k for k in candidates if not k.ours)
            found, forbidden = self._look(upstream, namespace, bare)
            asked = (*asked, *upstream)
        if len(found) > 1:
            choices = " or ".join(_qualified(f.kind, bare) for f in found)
            raise SubstrateError(
                f"{' and '.join(f.kind.kind for f in found)} are both named {bare!r} in "
                f"namespace {namespace!r}; say which: {choices}"
            )
        if not found:
            raise self._not_found(bare, namespace, candidates, asked, missing, forbidden)
        return found[0]

    def _look(
        self, kinds: Iterable[JobKind], namespace: str, name: str
    ) -> tuple[list[Found], list[JobKind]]:
        """The objects named ``name`` of ``kinds`` (the first group of each kind that has
        one), and the kinds passed over: a 404 in our group (no such object, or no CRD),
        a 403 in an upstream group (see :func:`passed_over`)."""
        found: dict[str, Found] = {}
        passed: list[JobKind] = []
        for kind in kinds:
            if kind.kind in found:
                continue
            request = kind.request_for("get", namespace, name)
            try:
                raw = self.http.json(request, "GET", kind.path(namespace, name))
            except KubeApiError as exc:
                if not passed_over(kind, exc):
                    raise
                if kind.ours or exc.status == 403:
                    passed.append(kind)
                continue
            found[kind.kind] = Found(kind, raw)
        return list(found.values()), passed

    def _not_found(
        self,
        bare: str,
        namespace: str,
        candidates: tuple[JobKind, ...],
        asked: tuple[JobKind, ...],
        missing: list[JobKind],
        forbidden: list[JobKind],
    ) -> SubstrateError:
        """Why no job ``bare`` was found: our CRDs not installed, or none of that name in
        the groups ``asked`` (``missing``: those of our group that answered 404;
        ``forbidden``: those of upstream groups RBAC did not let us read)."""
        unserved = self._unserved(missing) if missing else []
        if unserved and len(unserved) == len([k for k in candidates if k.ours]):
            return CRDsNotInstalled([k.resource for k in unserved], self.server)
        unasked = [k.resource for k in candidates if not k.ours and k not in asked]
        if not asked:  # a name qualified with a group the cluster does not serve
            return JobNotFound(
                f"no job {bare!r}: the cluster does not serve {', '.join(unasked)} (an "
                "upstream group is served by an operator started with --serve-upstream-groups)"
            )
        note = ""
        if unserved:
            verb = "is" if len(unserved) == 1 else "are"
            note = f" ({', '.join(k.resource for k in unserved)} {verb} not installed)"
        if forbidden:
            note += f" (not allowed to read {', '.join(k.resource for k in forbidden)})"
        names = list(dict.fromkeys(k.kind for k in asked))
        kinds_text = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
        groups = " or ".join(dict.fromkeys(k.api_version for k in asked))
        return JobNotFound(
            f"no job {bare!r} in namespace {namespace!r} (no {kinds_text} of that name in "
            f"{groups}){note}; `kubemill get -n {namespace}` shows the jobs there"
        )

    def _served(self, kinds: Iterable[JobKind]) -> tuple[JobKind, ...]:
        """Those of ``kinds`` whose group and version the cluster serves (its discovery,
        ``GET /apis``, read once for the lookup's life). A group not served is no error:
        most clusters serve none of the upstream groups."""
        kinds = tuple(kinds)
        if not kinds:
            return ()
        if self._group_versions is None:
            request = Request("get", "/apis")
            try:
                answer = self.http.json(request, "GET", "/apis")
            except KubeApiError as exc:
                if exc.status not in (403, 404):
                    raise
                answer = {}  # discovery refused: our group alone, as without upstream groups
            self._group_versions = frozenset(
                str(version.get("groupVersion"))
                for group in answer.get("groups") or ()
                for version in group.get("versions") or ()
            )
        return tuple(k for k in kinds if k.api_version in self._group_versions)

    def _unserved(self, kinds: Iterable[JobKind]) -> list[JobKind]:
        """Those of ``kinds`` the cluster's discovery does not list (CRD not installed)."""
        request = Request("get", f"/apis/{GROUP}/{VERSION}")
        try:
            answer = self.http.json(request, "GET", f"/apis/{GROUP}/{VERSION}")
            served = {str(r.get("name")) for r in answer.get("resources") or ()}
        except KubeApiError as exc:
            if exc.status != 404:
                raise
            served = set()
        return [k for k in kinds if k.plural not in served]

    def require_crds(self, kinds: Iterable[JobKind]) -> None:
        """Raise :class:`CRDsNotInstalled` if discovery does not list these kinds."""
        missing = self._unserved(kinds)
        if missing:
            raise CRDsNotInstalled([k.resource for k in missing], self.server)

    def listed(self, namespace: str | None) -> list[Found]:
        """Every job object of ``namespace`` (every namespace when ``None``): those of our
        group, and those of each upstream group the cluster serves.

        An object of an upstream group that kubemill cannot load (another operator's, or one
        using a field kubemill refuses) is left out: it is no job kubemill runs, and one such
        object must not hide the others; ``find`` of its name says what is wrong with it.
        A 404 there (the group served without this kind's CRD) or a 403 (see
        :func:`passed_over`) lists none of that kind.
        """
        objects: dict[str, Found] = {}  # by uid: an object served at two versions is one job
        missing: list[JobKind] = []
        ours = job_kinds()
        for kind in (*ours, *self._served(upstream_kinds())):
            request = kind.request_for("list", namespace)
            try:
                answer = self.http.json(request, "GET", kind.path(namespace))
            except KubeApiError as exc:
                if not passed_over(kind, exc):
                    raise
                if kind.ours:
                    missing.append(kind)
                continue  # an upstream group without this kind's CRD, or not ours to read
            for item in answer.get("items") or ():
                # Lists do not repeat kind/apiVersion on items (the list has them).
                item.setdefault("apiVersion", kind.api_version)
                item.setdefault("kind", kind.kind)
                found = Found(kind, item)
                if found.uid in objects or not (kind.ours or _loads(found)):
                    continue
                objects[found.uid or f"{kind.resource}/{found.namespace}/{found.name}"] = found
        if len(missing) == len(ours):
            self.require_crds(missing)  # none served: say so (a partial install lists the rest)
        return list(objects.values())


def _qualified(kind: JobKind, name: str) -> str:
    """How a user names ``name`` of ``kind`` in its group: ``tfjob/x`` in ours,
    ``tfjobs.kubeflow.org/x`` in an upstream group."""
    return f"{kind.kind.lower()}/{name}" if kind.ours else f"{kind.resource}/{name}"


def passed_over(kind: JobKind, exc: KubeApiError) -> bool:
    """Whether a lookup of ``kind`` that failed with ``exc`` just finds nothing there: a 404
    (no object of that name, or no CRD of the kind), or in an upstream group a 403 (RBAC
    may grant kubemill's group alone, and a cluster serving Kubeflow's or KubeRay's group
    for their own operators must not make every lookup fail)."""
    return exc.status == 404 or (exc.status == 403 and not kind.ours)


def _loads(found: Found) -> bool:
    """Whether kubemill can load ``found`` as a job."""
    try:
        found.job()
    except SubstrateError:
        return False
    return True
