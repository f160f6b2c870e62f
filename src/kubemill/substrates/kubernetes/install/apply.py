"""Applying the manifests to a cluster and taking them away: ``kubemill install`` (server-side
apply, then waiting for readiness), ``kubemill uninstall`` and ``kubemill version``'s
look at the operator.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from kubemill.api import GROUP, VERSION
from kubemill.kinds import crds, entries
from kubemill.substrates.base import SubstrateError
from kubemill.substrates.kubernetes.install.manifests import build_deployment, build_namespace
from kubemill.substrates.kubernetes.install.names import DEFAULT_NAMESPACE, NAME
from kubemill.substrates.kubernetes.transport import api_path

if TYPE_CHECKING:
    # Annotations only: the client is loaded by the callers, who hand in its Http.
    from kubemill.substrates.kubernetes.client.connection import Http
    from kubemill.substrates.kubernetes.client.errors import Request


FIELD_MANAGER = "kubemill"
"""The field manager of every server-side apply ``kubemill install`` sends."""
CREATED_BY = "kubemill.dev/created-by"
"""Annotation on a namespace that ``kubemill install`` created (and uninstall may delete);
a namespace that existed before is never written nor deleted."""
CREATED_BY_VALUE = "kubemill-install"
APPLY_PATCH = "application/apply-patch+yaml"
DEFAULT_WAIT_SECONDS = 300.0

Action = Literal["created", "configured", "unchanged"]
Progress = Callable[[str], None]


class InstallError(SubstrateError):
    """The installation could not finish: a conflict, or the cluster never got ready."""


@dataclass(frozen=True)
class Target:
    """Where one kind of install object lives in the API."""

    group: str
    version: str
    plural: str
    namespaced: bool


TARGETS: dict[str, Target] = {
    "Namespace": Target("", "v1", "namespaces", False),
    "CustomResourceDefinition": Target(
        "apiextensions.k8s.io", "v1", "customresourcedefinitions", False
    ),
    "ServiceAccount": Target("", "v1", "serviceaccounts", True),
    "ClusterRole": Target("rbac.authorization.k8s.io", "v1", "clusterroles", False),
    "ClusterRoleBinding": Target("rbac.authorization.k8s.io", "v1", "clusterrolebindings", False),
    "Role": Target("rbac.authorization.k8s.io", "v1", "roles", True),
    "RoleBinding": Target("rbac.authorization.k8s.io", "v1", "rolebindings", True),
    "Deployment": Target("apps", "v1", "deployments", True),
    "Service": Target("", "v1", "services", True),
}
"""Every kind :func:`install_manifests` writes."""


@dataclass(frozen=True)
class Applied:
    """One object of an install and what applying it did (or would do, in a dry run)."""

    kind: str
    name: str
    namespace: str | None
    action: Action

    def __str__(self) -> str:
        where = f" -n {self.namespace}" if self.namespace else ""
        return f"{self.kind.lower()}/{self.name}{where} {self.action}"


def _target(obj: Mapping[str, Any]) -> Target:
    kind = str(obj["kind"])
    if kind in TARGETS:
        return TARGETS[kind]
    return _extra_target(obj)


def _extra_target(obj: Mapping[str, Any]) -> Target:
    """Where an object an engine's install extra adds lives (its group and version from the
    object, its resource from the extra)."""
    from kubemill.substrates.kubernetes.install.manifests import install_extras

    kind = str(obj["kind"])
    for extra in install_extras().values():
        if kind in extra.resources:
            plural, namespaced = extra.resources[kind]
            group, _, version = str(obj["apiVersion"]).rpartition("/")
            return Target(group, version, plural, namespaced)
    raise KeyError(f"{kind}: no install writes objects of this kind")


def _path(obj: Mapping[str, Any]) -> str:
    target, meta = _target(obj), obj["metadata"]
    return api_path(
        group=target.group,
        version=target.version,
        plural=target.plural,
        namespace=meta.get("namespace") if target.namespaced else None,
        name=str(meta["name"]),
    )


def _request(verb: str, obj: Mapping[str, Any]) -> Request:
    from kubemill.substrates.kubernetes.client.errors import Request

    target, meta = _target(obj), obj["metadata"]
    return Request(
        verb,
        target.plural,
        target.group,
        meta.get("namespace") if target.namespaced else None,
        str(meta["name"]),
    )


def read_object(http: Http, obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The object as the cluster has it, or None when it does not exist."""
    from kubemill.substrates.kubernetes.client.errors import KubeApiError

    try:
        found: dict[str, Any] = http.json(_request("get", obj), "GET", _path(obj))
    except KubeApiError as exc:
        if exc.status == 404:
            return None
        raise
    return found


def _comparable(obj: Mapping[str, Any] | None) -> Any:
    """An object without what every write changes (its version, the apply times)."""
    if obj is None:
        return None
    meta = {k: v for k, v in obj.get("metadata", {}).items() if k != "resourceVersion"}
    meta["managedFields"] = [
        {k: v for k, v in entry.items() if k != "time"} for entry in meta.get("managedFields", [])
    ]
    return {**obj, "metadata": meta}


def apply_object(
    http: Http, obj: Mapping[str, Any], *, dry_run: bool = False, force: bool = False
) -> Applied:
    """Server-side apply of one object (fieldManager ``kubemill``): created, configured or
    unchanged, told apart by the resourceVersion (a dry run compares the object itself)."""
    from kubemill.substrates.kubernetes.client.errors import KubeApiError

    before = read_object(http, obj)
    meta = obj["metadata"]
    namespace = meta.get("namespace") if _target(obj).namespaced else None
    query = [("fieldManager", FIELD_MANAGER)]
    if force:
        query.append(("force", "true"))
    if dry_run:
        if before is None:
            # Not sent: its namespace may not exist yet, which a dry run cannot create.
            return Applied(str(obj["kind"]), str(meta["name"]), namespace, "created")
        query.append(("dryRun", "All"))
    try:
        after = http.json(
            _request("patch", obj), "PATCH", _path(obj), query=query, body=dict(obj),
            content_type=APPLY_PATCH,
        )  # fmt: skip
    except KubeApiError as exc:
        if exc.status == 409:
            raise InstallError(
                f"{obj['kind'].lower()}/{meta['name']}: another field manager changed fields "
                f"kubemill sets ({exc.api_message}); `kubemill install --force-conflicts` "
                "takes them back"
            ) from exc
        raise
    action: Action
    if before is None:
        action = "created"
    elif dry_run:
        action = "unchanged" if _comparable(after) == _comparable(before) else "configured"
    else:
        same = after.get("metadata", {}).get("resourceVersion") == before["metadata"].get(
            "resourceVersion"
        )
        action = "unchanged" if same else "configured"
    return Applied(str(obj["kind"]), str(meta["name"]), namespace, action)


def _owned_namespace(http: Http, namespace: str) -> dict[str, Any] | None:
    """The namespace to apply: marked as ours when install creates it (or did before);
    None when it existed already and belongs to someone else."""
    wanted = build_namespace(namespace)
    found = read_object(http, wanted)
    annotations = ((found or {}).get("metadata") or {}).get("annotations") or {}
    if found is not None and annotations.get(CREATED_BY) != CREATED_BY_VALUE:
        return None
    wanted["metadata"]["annotations"] = {CREATED_BY: CREATED_BY_VALUE}
    return wanted


def install(
    http: Http,
    objects: Sequence[Mapping[str, Any]],
    *,
    dry_run: bool = False,
    force: bool = False,
    progress: Progress = lambda _line: None,
) -> list[Applied]:
    """Apply :func:`install_manifests`' objects in order; each result goes to ``progress``."""
    done: list[Applied] = []
    crds: list[Mapping[str, Any]] = []
    for obj in objects:
        if obj["kind"] == "CustomResourceDefinition":
            crds.append(obj)
        elif obj["kind"] not in TARGETS and crds and not dry_run:
            # An object of an extra's own kind is served once its CRD is established.
            wait_ready(http, crds, progress=progress)
            crds = []
        if obj["kind"] == "Namespace":
            owned = _owned_namespace(http, str(obj["metadata"]["name"]))
            if owned is None:
                progress(f"namespace/{obj['metadata']['name']} exists (not kubemill's): kept")
                continue
            obj = owned
        applied = apply_object(http, obj, dry_run=dry_run, force=force)
        progress(str(applied) + (" (dry run)" if dry_run else ""))
        done.append(applied)
    return done


def _condition(obj: Mapping[str, Any], kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def wait_ready(
    http: Http,
    objects: Sequence[Mapping[str, Any]],
    *,
    timeout: float = DEFAULT_WAIT_SECONDS,
    poll: float = 0.5,
    progress: Progress = lambda _line: None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Wait for the CRDs to be Established and the operator Deployment to be Available.

    On a cluster the apiextensions controller sets ``Established`` once a CRD's resources are
    served, and the deployment controller sets ``Available`` once enough replicas pass their
    readiness probe. Progress goes to ``progress`` whenever it changes.
    """
    deadline = clock() + timeout
    crd_objects = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
    deployments = [o for o in objects if o["kind"] == "Deployment"]
    said = ""

    def tell(line: str) -> None:
        nonlocal said
        if line != said:
            progress(line)
            said = line

    while True:
        pending = [
            str(o["metadata"]["name"])
            for o in crd_objects
            if not _condition(read_object(http, o) or {}, "Established")
        ]
        if not pending:
            break
        tell(f"waiting for {len(pending)} of {len(crd_objects)} CRDs to be established")
        if clock() >= deadline:
            raise InstallError(
                f"the CRDs {', '.join(pending)} were not established within {timeout:g}s; "
                "`kubectl get crd NAME -o yaml` shows their conditions"
            )
        sleep(poll)
    if crd_objects:
        tell(f"{len(crd_objects)} CRDs established")
    for deployment in deployments:
        meta = deployment["metadata"]
        name = f"deployment/{meta['name']} -n {meta['namespace']}"
        while True:
            found = read_object(http, deployment) or {}
            status = found.get("status") or {}
            wanted = (found.get("spec") or {}).get("replicas", 1)
            current = int(status.get("observedGeneration", 0)) >= int(
                (found.get("metadata") or {}).get("generation", 1)
            )
            if current and _condition(found, "Available"):
                break
            ready = status.get("readyReplicas", 0)
            tell(f"waiting for {name} to be available: {ready}/{wanted} replicas ready")
            if clock() >= deadline:
                raise InstallError(
                    f"{name} was not available within {timeout:g}s ({ready}/{wanted} replicas "
                    f"ready); `kubectl -n {meta['namespace']} describe deployment {meta['name']}` "
                    "shows why (an image that cannot be pulled, a failing probe, ...)"
                )
            sleep(poll)
        tell(f"{name} available")


# -- uninstall


@dataclass(frozen=True)
class Uninstalled:
    """What ``kubemill uninstall`` deleted (or would delete) and the jobs it left."""

    deleted: list[str]
    jobs: dict[str, int]
    """Jobs per kind in the cluster: deleted with the CRDs, else kept."""


def _list(http: Http, kind: str, *, namespace: str | None, labels: str) -> list[dict[str, Any]]:
    """Objects of ``kind`` with ``labels`` (``kind`` set on each: list items may lack it)."""
    from kubemill.substrates.kubernetes.client.errors import Request

    target = TARGETS[kind]
    path = api_path(
        group=target.group, version=target.version, plural=target.plural, namespace=namespace
    )
    request = Request("list", target.plural, target.group, namespace)
    answer = http.json(request, "GET", path, query=[("labelSelector", labels)])
    return [{**item, "kind": kind} for item in answer.get("items") or []]


def _binds_to(binding: Mapping[str, Any], namespace: str) -> bool:
    return any(
        (s.get("kind"), s.get("name"), s.get("namespace")) == ("ServiceAccount", NAME, namespace)
        for s in binding.get("subjects") or []
    )


def installed_objects(http: Http, namespace: str) -> list[dict[str, Any]]:
    """The objects of the installation in ``namespace``, in deletion order.

    Found by the labels install writes; RBAC in other namespaces and at the cluster scope
    only when its binding names this installation's ServiceAccount.
    """
    labels = f"app.kubernetes.io/name={NAME},app.kubernetes.io/part-of=kubemill"
    found: list[dict[str, Any]] = []
    for kind in ("Deployment", "Service", "ServiceAccount"):
        found += _list(http, kind, namespace=namespace, labels=labels)
    for binding_kind, role_kind in (("RoleBinding", "Role"), ("ClusterRoleBinding", "ClusterRole")):
        roles = _list(http, role_kind, namespace=None, labels=labels)
        for binding in _list(http, binding_kind, namespace=None, labels=labels):
            if not _binds_to(binding, namespace):
                continue
            found.append(binding)
            found += [
                role
                for role in roles
                if role["metadata"]["name"] == binding["roleRef"]["name"]
                and role["metadata"].get("namespace") == binding["metadata"].get("namespace")
            ]
    return found


def count_jobs(http: Http) -> dict[str, int]:
    """How many jobs of each kubemill kind exist, in every namespace."""
    from kubemill.substrates.kubernetes.client.errors import KubeApiError, Request

    counts: dict[str, int] = {}
    for engine in entries():
        path = api_path(group=GROUP, version=VERSION, plural=engine.api.plural, namespace=None)
        request = Request("list", engine.api.plural, GROUP)
        items, token = 0, ""
        while True:  # page by page: a cluster may hold many jobs
            query = [("limit", "500")] + ([("continue", token)] if token else [])
            try:
                answer = http.json(request, "GET", path, query=query)
            except KubeApiError as exc:
                if exc.status == 404:
                    break  # its CRD is not installed
                raise
            items += len(answer.get("items") or [])
            token = str((answer.get("metadata") or {}).get("continue") or "")
            if not token:
                break
        if items:
            counts[engine.kind] = items
    return counts


def _delete(http: Http, obj: Mapping[str, Any]) -> bool:
    from kubemill.substrates.kubernetes.client.errors import KubeApiError

    try:
        http.json(
            _request("delete", obj), "DELETE", _path(obj),
            body={"propagationPolicy": "Background"},
        )  # fmt: skip
    except KubeApiError as exc:
        if exc.status == 404:
            return False
        raise
    return True


def uninstall(
    http: Http,
    *,
    namespace: str = DEFAULT_NAMESPACE,
    delete_crds: bool = False,
    dry_run: bool = False,
    progress: Progress = lambda _line: None,
) -> Uninstalled:
    """Delete what :func:`install` created in ``namespace``: the Deployment, its Service,
    ServiceAccount and RBAC, the namespace if install created it, and with ``delete_crds``
    the CRDs (which deletes every job of their kinds). Jobs are counted first, for the
    caller's warning."""
    jobs = count_jobs(http)
    objects = installed_objects(http, namespace)
    if delete_crds:
        objects += [crd for crd in crds() if read_object(http, crd) is not None]
    owned = read_object(http, build_namespace(namespace))
    annotations = ((owned or {}).get("metadata") or {}).get("annotations") or {}
    if owned is not None and annotations.get(CREATED_BY) == CREATED_BY_VALUE:
        objects.append(build_namespace(namespace))
    deleted: list[str] = []
    for obj in objects:
        meta = obj["metadata"]
        where = f" -n {meta['namespace']}" if meta.get("namespace") else ""
        label = f"{str(obj['kind']).lower()}/{meta['name']}{where}"
        if dry_run or _delete(http, obj):
            deleted.append(label)
            progress(f"{label} deleted" + (" (dry run)" if dry_run else ""))
    return Uninstalled(deleted=deleted, jobs=jobs)


def operator_version(http: Http, namespace: str = DEFAULT_NAMESPACE) -> dict[str, Any] | None:
    """The installed operator: version (the Deployment's ``app.kubernetes.io/version``
    label, written by install), image and replicas; None when it is not installed."""
    deployment = build_deployment(namespace=namespace, args=[])
    found = read_object(http, deployment)
    if found is None:
        return None
    labels = found["metadata"].get("labels") or {}
    containers = found["spec"]["template"]["spec"].get("containers") or [{}]
    status = found.get("status") or {}
    return {
        "version": labels.get("app.kubernetes.io/version", "unknown"),
        "image": containers[0].get("image", ""),
        "replicas": (found.get("spec") or {}).get("replicas", 1),
        "available": status.get("availableReplicas", 0),
        "namespace": namespace,
    }
