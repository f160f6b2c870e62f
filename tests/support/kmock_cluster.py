"""A Kubernetes API for operator tests: kmock's emulator plus what kmock 0.8 leaves out.

kmock (``kmock.KubernetesEmulator``) stores objects, serves list/watch/fetch/create/patch/
delete over real HTTP and honours finalizers. A real API server does more, and the operator
depends on some of it (see docs/notes/kmock-gaps.md). :class:`KubeCluster` subclasses
the emulator (kmock's documented extension point: "inherit and implement for your cases")
and adds, for tests only:

- every write (create, PUT, merge/JSON patch, delete) is served here, not by kmock, and
  checked as a kube-apiserver checks it (:mod:`kube_schema`): custom resources are pruned
  and validated against their CRD's ``openAPIV3Schema``, built-in kinds against the
  official schemas, pod specs are immutable but for what Kubernetes allows, names and uids
  never change -- ``422 Invalid`` with the field paths (``spec.x: Invalid value: ...``);
- ``metadata.uid``, ``resourceVersion`` (one global counter, as etcd), ``creationTimestamp``,
  ``generation`` and ``namespace`` from the URL on create, ``generateName``; ``201
  Created``; ``409 AlreadyExists`` on a duplicate create; ``404`` for a create in a
  namespace that does not exist (a fresh cluster has ``default``, ``kube-system``,
  ``kube-public`` and ``kube-node-lease``; tests create the others);
- a Service's cluster IP: allocated from :data:`SERVICE_CIDR` on create unless it is
  headless (``None``) or ``ExternalName``; one asked for must be free and in the range
  (``422``); ``spec.clusterIPs`` follows; an update keeps it (one that changes it is
  ``422``); the address is free again when the Service goes;
- status-subresource semantics (a ``/status`` write changes only ``status``, a main-resource
  write never does), optimistic concurrency on ``metadata.resourceVersion`` (a PUT of a
  custom resource must carry one) and delete preconditions (``409 Conflict``);
- graceful deletion: finalizers hold a deleted object, and a pod bound to a node (see
  :meth:`KubeCluster.bind`) stays Terminating for its grace period until its kubelet
  finishes it (:meth:`KubeCluster.finish_terminating`, a zero-grace delete, or after
  ``kubelet_finishes_after`` seconds); unscheduled and finished pods go at once;
- label and field selectors on list and watch, ``kind``/``apiVersion`` on lists, the list's
  ``resourceVersion``; watches that resume from a resourceVersion, and ``410 Gone`` (an
  ``ERROR`` event) for versions older than the last :meth:`KubeCluster.compact`;
- ``/api/v1/namespaces`` (list, watch, get), CRDs that register their resources (and
  schemas) when created -- a v1 CRD without a schema is refused --, background garbage
  collection of dependents by ``ownerReferences`` (each deleted as a DELETE would);
- server-side apply (``PATCH`` with ``application/apply-patch+yaml``): ``fieldManager``
  required, ``force``, an object created when missing (``201``), ``metadata.managedFields``
  per manager (``Apply`` and, once an object has them, ``Update`` for other writes), fields a
  manager stops applying removed, a changed value another manager owns refused with ``409
  Conflict`` unless forced, a no-op apply leaving the object (and its resourceVersion)
  untouched, and ``dryRun=All``. Simplified: every list is atomic (the real server merges
  lists keyed by name, such as containers); namespaces take apply and delete too (a
  namespace still holding objects stays ``Terminating``: there is no namespace controller);
- a log of every request (:class:`Call`), injected faults (:class:`Fault`), gates that hold
  matching requests until released (:class:`Gate`), and dropping all watch connections;
- the pod ``exec`` subresource, as a websocket speaking ``v4.channel.k8s.io`` (see
  :meth:`KubeCluster._serve_exec`): the API server's checks are real, only the kubelet is
  emulated -- the command runs as a local process in the pod's environment (its container's
  env, a working dir and a TMPDIR of its own, and what the test adds in
  :attr:`KubeCluster.exec_environment`).

:class:`ClusterThread` serves a cluster on 127.0.0.1 from a background thread and gives the
(synchronous) tests a small client; requests it sends carry the ``kubemill-tests`` user
agent so the operator's own calls can be told apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime
import ipaddress
import itertools
import json
import os
import random
import re
import shutil
import signal
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp.web
import attrs
import jsonpatch
import jsonpointer
import kmock
import yaml
from kmock._internal import aiobus, rendering  # the emulator's own types, for overriding it
from kmock._internal import dicts as kmock_dicts

from support import kube_schema
from support.kubelet_exec import V4, exit_code, status_json

TEST_USER_AGENT = "kubemill-tests"
CONNECT_SUBRESOURCES = frozenset({"exec", "attach", "portforward"})
"""Pod subresources a client connects to (a stream): see :attr:`Call.verbs_checked`."""

# --- selectors -------------------------------------------------------------------------------

_SET_TERM = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _split_terms(selector: str) -> list[str]:
    """Split on commas that are not inside ``(...)``."""
    terms, depth, current = [], 0, ""
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    terms.append(current)
    return [t.strip() for t in terms if t.strip()]


def label_selector_matches(selector: str, labels: Mapping[str, str]) -> bool:
    """Kubernetes label-selector semantics: equality, inequality, existence and set terms."""
    for term in _split_terms(selector):
        if match := _SET_TERM.match(term):
            key, op, values = match.group(1), match.group(2), match.group(3)
            allowed = {v.strip() for v in values.split(",") if v.strip()}
            inside = key in labels and labels[key] in allowed
            if (op == "in") != inside:
                return False
        elif "!=" in term:
            key, value = (p.strip() for p in term.split("!=", 1))
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = (p.strip() for p in term.replace("==", "=").split("=", 1))
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return "" if value is None else str(value)


def field_selector_matches(selector: str, obj: Mapping[str, Any]) -> bool:
    """Field selectors: ``path=value``, ``path==value`` and ``path!=value`` terms."""
    for term in _split_terms(selector):
        if "!=" in term:
            path, value = (p.strip() for p in term.split("!=", 1))
            if _field_value(obj, path) == value:
                return False
        else:
            path, value = (p.strip() for p in term.replace("==", "=").split("=", 1))
            if _field_value(obj, path) != value:
                return False
    return True


def _selected(obj: Mapping[str, Any], params: Mapping[str, str]) -> bool:
    labels = obj.get("metadata", {}).get("labels") or {}
    if params.get("labelSelector") and not label_selector_matches(params["labelSelector"], labels):
        return False
    return not (
        params.get("fieldSelector") and not field_selector_matches(params["fieldSelector"], obj)
    )


# --- the request log, faults and gates -------------------------------------------------------


@dataclass
class Call:
    """One request the cluster received (logged on arrival; ``status`` set when answered)."""

    method: str
    path: str
    group: str | None
    version: str | None
    plural: str | None
    namespace: str | None
    name: str | None
    subresource: str | None
    watch: bool
    status: int
    user_agent: str
    params: Mapping[str, str] = field(default_factory=dict)
    body: Any = None

    @property
    def verb(self) -> str:
        """The RBAC verb of this request (``get``, ``list``, ``watch``, ``create``, ...)."""
        if self.watch:
            return "watch"
        if self.method == "GET":
            return "get" if self.name else "list"
        return {"POST": "create", "PATCH": "patch", "PUT": "update", "DELETE": "delete"}.get(
            self.method, self.method.lower()
        )

    @property
    def verbs_checked(self) -> tuple[str, ...]:
        """Every verb RBAC must allow for this request. A WebSocket upgrade to a pod's
        stream is a GET, logged as ``get``, and kube-apiserver 1.35+ checks ``create`` on it
        too (AuthorizePodWebsocketUpgradeCreatePermission), as it does for the POST that
        SPDY clients send; as the real server showed, a Role granting ``create`` alone is
        refused."""
        if self.subresource in CONNECT_SUBRESOURCES and self.method == "GET":
            return ("get", "create")
        return (self.verb,)

    @property
    def resource(self) -> str:
        """``plural`` or ``plural/subresource``, as RBAC rules name resources."""
        base = self.plural or ""
        return f"{base}/{self.subresource}" if self.subresource else base

    @property
    def is_write(self) -> bool:
        return self.method in ("POST", "PATCH", "PUT", "DELETE")

    @property
    def from_tests(self) -> bool:
        return self.user_agent.startswith(TEST_USER_AGENT)

    def __str__(self) -> str:
        return f"{self.method} {self.path} -> {self.status}"


@dataclass
class Fault:
    """Answer matching requests with an error instead of serving them, ``times`` times."""

    status: int
    method: str | None = None
    plural: str | None = None
    subresource: str | None = None
    namespace: str | None = None
    name: str | None = None
    times: int = 1
    reason: str = ""
    hits: int = 0

    def matches(self, request: rendering.Request) -> bool:
        resource = request.resource
        return (
            self.times > 0
            and (self.method is None or request.method.value == self.method)
            and (self.plural is None or (resource is not None and resource.plural == self.plural))
            and (self.subresource is None or request.subresource == self.subresource)
            and (self.namespace is None or request.namespace == self.namespace)
            and (self.name is None or request.name == self.name)
        )


_REASONS = {
    409: "Conflict",
    410: "Gone",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
}


@dataclass
class Gate:
    """Hold matching requests (before they change anything) until :meth:`open` is called."""

    method: str | None = None
    plural: str | None = None
    namespace: str | None = None
    subresource: str | None = None
    skip: int = 0
    """Let this many matching requests through before holding the rest."""
    drop: bool = False
    """When opened, fail the held requests (500) instead of serving them: as if the API
    server never got them."""
    held: int = 0
    seen: int = 0
    _opened: threading.Event = field(default_factory=threading.Event)

    def matches(self, request: rendering.Request) -> bool:
        resource = request.resource
        return (
            (self.method is None or request.method.value == self.method)
            and (self.plural is None or (resource is not None and resource.plural == self.plural))
            and (self.namespace is None or request.namespace == self.namespace)
            and (self.subresource is None or request.subresource == self.subresource)
        )

    def open(self) -> None:
        self._opened.set()


# --- pods/exec ---------------------------------------------------------------------------------

_TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
_EXEC_PATH = re.compile(r"/api/v1/namespaces/(?P<namespace>[^/]+)/pods/(?P<pod>[^/]+)/exec/?")
_EXEC_PROTOCOL = V4
_EXEC_FLAGS = ("stdin", "stdout", "stderr", "tty")
_EXEC_DRAIN_SECONDS = 5.0
"""How long an exited command's pipes may stay open (held by what it started)."""
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
"""Go's strconv.ParseBool, which the API server's query decoding uses."""
_NO_COMMAND = "you must specify at least one command for the container"
_NO_STREAMS = "you must specify at least 1 of stdin, stdout, stderr"


class _ExecRefused(Exception):
    """An exec request answered with an error before the upgrade."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message

    def status(self) -> dict[str, Any]:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }


def _exec_flag(query: Mapping[str, str], name: str) -> bool:
    value = query.get(name)
    if value is None or value in _FALSE:
        return False
    if value in _TRUE:
        return True
    raise _ExecRefused(400, "BadRequest", f'{name}: Invalid value: "{value}": not a boolean')


def _pod_containers(spec: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Every container of a pod spec by name (init and ephemeral ones too)."""
    return {
        str(c.get("name")): c
        for key in ("containers", "initContainers", "ephemeralContainers")
        for c in spec.get(key) or []
    }


def _exec_container(pod: Mapping[str, Any], wanted: str | None) -> str:
    """The container an exec goes to: the one named, or the pod's only one."""
    spec = pod.get("spec") or {}
    name = (pod.get("metadata") or {}).get("name")
    if wanted:
        if wanted not in _pod_containers(spec):
            raise _ExecRefused(400, "BadRequest", f"container {wanted} is not valid for pod {name}")
        return wanted
    names = [str(c.get("name")) for c in spec.get("containers") or []]
    if len(names) != 1:
        raise _ExecRefused(
            400,
            "BadRequest",
            f"a container name must be specified for pod {name}, choose one of: "
            f"[{' '.join(names)}]",
        )
    return names[0]


def _check_running(pod: Mapping[str, Any], container: str) -> None:
    """A command runs only in a running container of a pod on a node (400 otherwise)."""
    name = (pod.get("metadata") or {}).get("name")
    status = pod.get("status") or {}
    phase = status.get("phase")
    if not (pod.get("spec") or {}).get("nodeName"):
        raise _ExecRefused(400, "BadRequest", f"pod {name} does not have a host assigned")
    if phase in ("Succeeded", "Failed"):
        raise _ExecRefused(
            400,
            "BadRequest",
            f"cannot exec into a container in a completed pod; current phase is {phase}",
        )
    statuses = {
        s.get("name"): s
        for key in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses")
        for s in status.get(key) or []
    }
    running = "running" in ((statuses.get(container) or {}).get("state") or {})
    if phase != "Running" or not running:
        raise _ExecRefused(
            400,
            "BadRequest",
            f'unable to upgrade connection: container not found ("{container}")',
        )


async def _end_process_group(proc: asyncio.subprocess.Process, grace: float = 5.0) -> None:
    """SIGTERM the process's group, SIGKILL it after ``grace`` seconds; wait for it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), grace)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()


# --- the cluster -----------------------------------------------------------------------------


def _now() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_PODS = kmock.resource("", "v1", "pods")
_SERVICES = kmock.resource("", "v1", "services")
_ROLES = kmock.resource("rbac.authorization.k8s.io", "v1", "roles")
SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/12")
"""Where Services' cluster IPs come from (kubeadm's default ``--service-cluster-ip-range``);
its first address is the ``kubernetes`` Service's, as on a cluster."""
_GENERATED_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # the API server's alphabet
_SERVER_META = (
    "uid",
    "creationTimestamp",
    "generation",
    "resourceVersion",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
"""Metadata the server owns: an update keeps the stored values whatever it sends."""


def _bad_request(message: str) -> kmock.KubernetesError:
    return kmock.KubernetesError(status=400, reason="BadRequest", message=message, details={})


def _conflict(message: str) -> kmock.KubernetesError:
    return kmock.KubernetesError(status=409, reason="Conflict", message=message, details={})


def _spec_of(obj: Mapping[str, Any]) -> Any:
    """What a change of bumps ``metadata.generation``: all but metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _removable(obj: Mapping[str, Any]) -> bool:
    """A deleted object goes once no finalizer holds it and, for a pod, its kubelet is done
    (``deletionGracePeriodSeconds`` 0)."""
    meta = obj.get("metadata") or {}
    return bool(
        meta.get("deletionTimestamp")
        and not meta.get("finalizers")
        and not meta.get("deletionGracePeriodSeconds")
    )


PROTECTED_GROUP_SUFFIXES = (".k8s.io", ".kubernetes.io")
"""API groups whose CRDs kube-apiserver accepts only with an ``api-approved.kubernetes.io``
annotation (the Kubernetes API review; its value a URL, or ``unapproved, ...``)."""


def _crd_errors(crd: Mapping[str, Any]) -> list[kube_schema.FieldError]:
    """apiextensions.k8s.io/v1 requires a schema for every version, and the approval
    annotation for a protected group (the real server refuses both with 422; found when
    the spark-operator's group was first created on one)."""
    errors = []
    group = str((crd.get("spec") or {}).get("group") or "")
    annotations = (crd.get("metadata") or {}).get("annotations") or {}
    if (
        group.endswith(PROTECTED_GROUP_SUFFIXES) or group in ("k8s.io", "kubernetes.io")
    ) and not annotations.get("api-approved.kubernetes.io"):
        errors.append(
            kube_schema.FieldError(
                "metadata.annotations[api-approved.kubernetes.io]",
                "Required",
                detail="protected groups must have approval annotation api-approved.kubernetes.io",
            )
        )
    for index, version in enumerate((crd.get("spec") or {}).get("versions") or []):
        if not (version.get("schema") or {}).get("openAPIV3Schema"):
            errors.append(
                kube_schema.FieldError(
                    f"spec.versions[{index}].schema.openAPIV3Schema",
                    "Required",
                    detail="schemas are required",
                )
            )
    return errors


APPLY_PATCH = "application/apply-patch+yaml"
_UNTRACKED_META = frozenset(
    {
        "name",
        "namespace",
        "generateName",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
    }
)
"""Metadata that no field manager owns (the server's, and the object's identity)."""

FieldPath = tuple[str, ...]


def _is_apply(request: rendering.Request) -> bool:
    return request.headers.get("Content-Type", "").split(";")[0].strip() == APPLY_PATCH


def _invalid_options(
    path: str, reason: str, detail: str, value: Any = None
) -> kmock.KubernetesError:
    """``422`` on the options of a request, as the API server words it for PatchOptions."""
    error = kube_schema.FieldError(path, reason, value, detail=detail)
    status = kube_schema.invalid_status("PatchOptions", "meta.k8s.io", "", [error])
    return kmock.KubernetesError(
        status=422, reason="Invalid", message=status["message"], details=status["details"]
    )


def _leaf_paths(obj: Mapping[str, Any], *, skip_status: bool) -> dict[FieldPath, Any]:
    """The fields an object sets, as paths to their values (lists are atomic: one leaf)."""
    out: dict[FieldPath, Any] = {}

    def walk(value: Mapping[str, Any], prefix: FieldPath) -> None:
        for key, item in value.items():
            if not prefix and (key in ("apiVersion", "kind") or (key == "status" and skip_status)):
                continue
            if prefix == ("metadata",) and key in _UNTRACKED_META:
                continue
            if isinstance(item, dict) and item:
                walk(item, (*prefix, key))
            else:
                out[(*prefix, key)] = item

    walk(obj, ())
    return out


def _to_fields_v1(paths: set[FieldPath]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for path in sorted(paths):
        node = tree
        for key in path:
            node = node.setdefault(f"f:{key}", {})
    return tree


def _from_fields_v1(tree: Mapping[str, Any], prefix: FieldPath = ()) -> set[FieldPath]:
    paths: set[FieldPath] = set()
    for key, child in tree.items():
        path = (*prefix, key.removeprefix("f:"))
        paths |= _from_fields_v1(child, path) if child else {path}
    return paths


def _overlaps(a: FieldPath, b: FieldPath) -> bool:
    shorter = min(len(a), len(b))
    return a[:shorter] == b[:shorter]


_MISSING = object()


def _value_at(obj: Any, path: FieldPath) -> Any:
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return _MISSING
        obj = obj[key]
    return obj


def _set_at(obj: dict[str, Any], path: FieldPath, value: Any) -> None:
    for key in path[:-1]:
        if not isinstance(obj.get(key), dict):
            obj[key] = {}
        obj = obj[key]
    obj[path[-1]] = copy.deepcopy(value)


def _remove_at(obj: dict[str, Any], path: FieldPath) -> None:
    """Remove a field, and the maps it leaves empty."""
    parents = [obj]
    for key in path[:-1]:
        child = parents[-1].get(key)
        if not isinstance(child, dict):
            return
        parents.append(child)
    parents[-1].pop(path[-1], None)
    for depth in range(len(path) - 1, 0, -1):
        if parents[depth]:
            break
        parents[depth - 1].pop(path[depth - 1], None)


def _manager_of(request: rendering.Request) -> str:
    """The ``fieldManager`` of a write, else (as the API server) its user agent's program."""
    given = request.params.get("fieldManager")
    if given:
        return str(given)
    agent = request.headers.get("User-Agent", "") or "unknown"
    return agent.split("/")[0].split(" ")[0]


def apply_fields(
    current: Mapping[str, Any] | None,
    applied: Mapping[str, Any],
    *,
    manager: str,
    force: bool,
    api_version: str,
    skip_status: bool,
) -> dict[str, Any]:
    """The object after ``manager`` applies ``applied`` to ``current`` (None: a create).

    Fields the manager applied before and no longer does are removed unless another manager
    owns them; a value that differs from one another manager owns is a ``409 Conflict``
    naming both, unless ``force`` moves the field to this manager. ``managedFields`` are
    rewritten, their time only where a manager's fields changed.
    """
    if current is None:  # a create: the object is named by what is applied
        identity = {
            k: v for k, v in (applied.get("metadata") or {}).items() if k in _UNTRACKED_META
        }
        new: dict[str, Any] = {"metadata": copy.deepcopy(identity)}
    else:
        new = copy.deepcopy(dict(current))
    entries: list[dict[str, Any]] = copy.deepcopy(
        list(((current or {}).get("metadata") or {}).get("managedFields") or [])
    )
    fields = _leaf_paths(applied, skip_status=skip_status)
    mine = next(
        (e for e in entries if e.get("manager") == manager and e.get("operation") == "Apply"),
        None,
    )
    previous = _from_fields_v1((mine or {}).get("fieldsV1") or {})
    others = [e for e in entries if e is not mine]
    conflicts: list[tuple[str, str, FieldPath]] = []
    for entry in others:
        owned = _from_fields_v1(entry.get("fieldsV1") or {})
        taken = {
            theirs
            for theirs in owned
            for path, value in fields.items()
            if _overlaps(theirs, path) and _value_at(new, path) != value
        }
        if taken and not force:
            conflicts += [
                (str(entry.get("manager")), str(entry.get("apiVersion", api_version)), p)
                for p in sorted(taken)
            ]
        elif taken:
            entry["fieldsV1"] = _to_fields_v1(owned - taken)
    if conflicts:
        causes = [
            {
                "reason": "FieldManagerConflict",
                "message": f'conflict with "{who}" using {version}',
                "field": "." + ".".join(path),
            }
            for who, version, path in conflicts
        ]
        listed = "\n".join(f"- {c['message']}: {c['field']}" for c in causes)
        count = len(causes)
        raise kmock.KubernetesError(
            status=409,
            reason="Conflict",
            message=f"Apply failed with {count} conflict{'s' if count > 1 else ''}:\n{listed}",
            details={"causes": causes},
        )
    still_owned = {p for e in others for p in _from_fields_v1(e.get("fieldsV1") or {})}
    for path in sorted(previous - set(fields), key=len, reverse=True):
        if not any(_overlaps(path, other) for other in still_owned):
            _remove_at(new, path)
    for path, value in fields.items():
        _set_at(new, path, value)
    updated = mine
    if set(fields) != previous or mine is None:
        updated = {
            "manager": manager,
            "operation": "Apply",
            "apiVersion": api_version,
            "time": _now(),
            "fieldsType": "FieldsV1",
            "fieldsV1": _to_fields_v1(set(fields)),
        }
    # Entries keep their places (a no-op apply changes nothing); a new one goes last.
    ordered = [updated if e is mine else e for e in entries]
    if mine is None:
        ordered.append(updated)
    meta = new.setdefault("metadata", {})
    meta["managedFields"] = [e for e in ordered if e is not None and e.get("fieldsV1")]
    for key in ("apiVersion", "kind"):
        if key in applied:
            new[key] = applied[key]
    return new


def record_update(
    current: Mapping[str, Any], new: dict[str, Any], *, manager: str, api_version: str
) -> None:
    """An ordinary write to an object with managed fields: the fields it changed move to
    ``manager`` (operation ``Update``), as the API server tracks every writer."""
    entries = copy.deepcopy(list((current.get("metadata") or {}).get("managedFields") or []))
    if not entries:
        return
    before = _leaf_paths(current, skip_status=False)
    after = _leaf_paths(new, skip_status=False)
    changed = {
        p for p in set(before) | set(after) if before.get(p, _MISSING) != after.get(p, _MISSING)
    }
    if not changed:
        new.setdefault("metadata", {})["managedFields"] = entries
        return
    for entry in entries:
        owned = _from_fields_v1(entry.get("fieldsV1") or {})
        entry["fieldsV1"] = _to_fields_v1(
            {p for p in owned if not any(_overlaps(p, c) for c in changed)}
        )
    entries = [e for e in entries if e.get("fieldsV1")]
    mine = next(
        (e for e in entries if e.get("manager") == manager and e.get("operation") == "Update"),
        None,
    )
    owned_now = _from_fields_v1((mine or {}).get("fieldsV1") or {}) | {
        p for p in changed if p in after
    }
    entry = {
        "manager": manager,
        "operation": "Update",
        "apiVersion": api_version,
        "time": _now(),
        "fieldsType": "FieldsV1",
        "fieldsV1": _to_fields_v1(owned_now),
    }
    entries = [e for e in entries if e is not mine] + ([entry] if owned_now else [])
    new.setdefault("metadata", {})["managedFields"] = entries


class _StampingBus(aiobus.Bus[Any]):
    """The emulator publishes every change on a bus per resource; stamp and log it here."""

    def __init__(self, cluster: KubeCluster, resource: kmock.resource) -> None:
        super().__init__()
        self._cluster = cluster
        self._resource = resource

    async def put(self, *items: Any) -> None:
        for item in items:
            await self._cluster._record_change(self._resource, item)
        await super().put(*items)


class _Buses(dict[Any, aiobus.Bus[Any]]):
    def __init__(self, cluster: KubeCluster) -> None:
        super().__init__()
        self._cluster = cluster

    def __missing__(self, resource: kmock.resource) -> aiobus.Bus[Any]:
        bus = self[resource] = _StampingBus(self._cluster, resource)
        return bus


@attrs.define(kw_only=True)
class KubeCluster(kmock.KubernetesEmulator):
    """kmock's Kubernetes emulator with the API-server behaviour kmock 0.8 lacks."""

    calls: list[Call] = attrs.field(factory=list, init=False)
    faults: list[Fault] = attrs.field(factory=list, init=False)
    gates: list[Gate] = attrs.field(factory=list, init=False)
    namespaces: set[str] = attrs.field(
        factory=lambda: {"default", "kube-system", "kube-public", "kube-node-lease"}, init=False
    )
    """The namespaces that exist: those of a fresh cluster, then what tests create."""
    graceful_pods: bool = attrs.field(default=True, init=False)
    """Pods on a node get a Terminating window on delete (their grace period); False deletes
    every pod at once."""
    kubelet_finishes_after: float | None = attrs.field(default=None, init=False)
    """Seconds after which a terminating pod is removed (a kubelet stopping it), capped by its
    grace period; None: it stays until :meth:`finish_terminating` or a zero-grace delete."""
    refused: list[tuple[str, str, list[str]]] = attrs.field(factory=list, init=False)
    """(plural, name, errors) of every write refused as invalid (422), for test messages."""
    _schemas: dict[Any, Mapping[str, Any]] = attrs.field(factory=dict, init=False)
    _tasks: set[asyncio.Task[None]] = attrs.field(factory=set, init=False)
    _rv: Iterator[int] = attrs.field(factory=lambda: itertools.count(1), init=False)
    _last_rv: int = attrs.field(default=0, init=False)
    _compacted_rv: int = attrs.field(default=0, init=False)
    _history: dict[Any, list[tuple[int, dict[str, Any]]]] = attrs.field(factory=dict, init=False)
    _changed: asyncio.Condition | None = attrs.field(default=None, init=False)
    _watch_epoch: int = attrs.field(default=0, init=False)
    _in_flight: set[int] = attrs.field(factory=set, init=False)
    expired_watches: int = attrs.field(default=0, init=False)
    """Watches answered with 410 Gone (resumed from a compacted resourceVersion)."""
    exec_environment: dict[tuple[str, str], dict[str, str]] = attrs.field(factory=dict, init=False)
    """Environment added to every command exec'd in a pod, by ``(namespace, pod)``: what the
    test's stand-in for the pod's image or node provides."""
    namespace_meta: dict[str, dict[str, Any]] = attrs.field(factory=dict, init=False)
    """The metadata of namespaces written by apply (labels, annotations, managedFields) and
    of those being deleted (``deletionTimestamp``)."""
    exec_root: Path | None = attrs.field(default=None, init=False)
    """Where pods get their working dirs and TMPDIRs (made on the first exec, removed when
    the cluster stops)."""
    _execs: set[asyncio.subprocess.Process] = attrs.field(factory=set, init=False)
    token_reviews: dict[str, dict[str, Any]] = attrs.field(factory=dict, init=False)
    """The API server's authenticator, played by the test: token -> the ``status`` a
    TokenReview of it answers (one asking for none of its ``audiences`` is not
    authenticated); a token not in it is not authenticated."""
    _cluster_ips: set[str] = attrs.field(factory=lambda: {str(SERVICE_CIDR[1])}, init=False)
    """Allocated Service cluster IPs (the ``kubernetes`` Service holds the first)."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self._buses = _Buses(self)
        self.resources.load_bundled()

    # -- entry points ------------------------------------------------------------------------

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        # kmock cannot parse /api/v1/namespaces (a cluster-scoped resource named like the
        # namespace segment of namespaced URLs) and answers 500: serve it before parsing.
        if re.fullmatch(r"/api/v1/namespaces(/[^/]+)?/?", raw_request.path):
            return await self._serve_namespaces(raw_request)
        if raw_request.path == _TOKEN_REVIEWS and raw_request.method == "POST":
            return await self._serve_token_review(raw_request)
        # The exec subresource is a websocket, which kmock does not serve.
        if match := _EXEC_PATH.fullmatch(raw_request.path):
            return await self._serve_exec(raw_request, match["namespace"], match["pod"])
        # kmock matches each request against its reactions by scanning its log of every
        # request so far (quadratic over a run); ours is ``calls``, so keep in kmock's log
        # only the requests still being answered.
        if len(self._requests) > 8:
            self._requests[:] = [r for r in self._requests if id(r) in self._in_flight]
        return await super().__call__(raw_request)

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        self._in_flight.add(id(request))
        call = self._log(request)
        try:
            for gate in self.gates:
                if gate.matches(request) and not gate._opened.is_set():
                    gate.seen += 1
                    if gate.seen > gate.skip:
                        gate.held += 1
                        while not gate._opened.is_set():
                            await asyncio.sleep(0.02)
                        if gate.drop:
                            raise kmock.KubernetesError(
                                status=500, reason="InternalError", message="dropped", details={}
                            )
            for fault in self.faults:
                if fault.matches(request):
                    fault.times -= 1
                    fault.hits += 1
                    raise kmock.KubernetesError(
                        status=fault.status,
                        reason=fault.reason or _REASONS.get(fault.status, "Injected"),
                        message=f"injected by the test: {fault.status}",
                        details={},
                    )
            if (
                request.resource is not None
                and request.resource.plural
                and request.method.value in ("POST", "PUT", "PATCH", "DELETE")
            ):
                response = await self._serve_write(request)
            else:
                response = await super()._handle(request)
            call.status = response.status
            return response
        except kmock.KubernetesError as exc:
            call.status = exc.status
            raise
        except asyncio.CancelledError:
            call.status = 200 if call.watch else 499  # the client went away
            raise
        except Exception:
            call.status = 500
            raise
        finally:
            self._in_flight.discard(id(request))

    def _log(self, request: rendering.Request, status: int = 0) -> Call:
        resource = request.resource
        call = Call(
            method=request.method.value,
            path=request.url.path,
            group=resource.group if resource else None,
            version=resource.version if resource else None,
            plural=resource.plural if resource else None,
            namespace=request.namespace,
            name=request.name,
            subresource=request.subresource,
            watch=request.params.get("watch") in ("true", "1"),
            status=status,
            user_agent=request.headers.get("User-Agent", ""),
            params=dict(request.params),
            # Copied: the emulator fills in the same dict (uid, namespace) afterwards.
            body=copy.deepcopy(request.data) if request.method.value != "GET" else None,
        )
        self.calls.append(call)
        return call

    # -- what a real API server does with a write ----------------------------------------------

    def _info(self, resource: kmock.resource) -> Any:
        # Not .get(): kmock creates an empty entry on a missed lookup (a defaultdict).
        return self.resources[resource] if resource in self.resources else None  # noqa: SIM401

    def _has_status_subresource(self, resource: kmock.resource) -> bool:
        info = self._info(resource)
        return info is not None and "status" in info.subresources

    def _stored(self, resource: Any, namespace: str | None, name: str | None) -> Any:
        key = (resource, namespace, name)
        if name and key in self.objects and not self.objects[key].deleted:
            return self.objects[key]
        return None

    def _kind(self, resource: kmock.resource) -> str:
        info = self._info(resource)
        return str(info.kind) if info is not None and info.kind else resource.plural

    def _not_found(self, resource: kmock.resource, name: str | None) -> kmock.KubernetesError:
        qualified = f"{resource.plural}.{resource.group}" if resource.group else resource.plural
        return kmock.KubernetesError(
            status=404,
            reason="NotFound",
            message=f'{qualified} "{name}" not found',
            details={"name": name, "group": resource.group, "kind": resource.plural},
        )

    async def _serve_write(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        """Create, update (PUT), patch and delete, checked and stored as an API server does."""
        resource = request.resource
        assert resource is not None
        method = request.method.value
        if method == "POST" and request.name and request.subresource == "binding":
            return aiohttp.web.json_response(await self._bind_request(request), status=201)
        if method == "PATCH" and request.name and _is_apply(request):
            return await self._apply(request)
        if "force" in request.params:
            raise _invalid_options("force", "Forbidden", "may not be specified for non-apply patch")
        if "dryRun" in request.params:
            # Never write what a client meant as a dry run: only apply takes it here.
            raise _bad_request("dryRun: this test API server supports it on apply patches only")
        if method == "POST" and not request.name:
            return aiohttp.web.json_response(await self._create(request), status=201)
        if method in ("PATCH", "PUT") and request.name:
            return aiohttp.web.json_response(await self._update(request))
        if method == "DELETE" and request.name:
            return aiohttp.web.json_response(await self._delete(request))
        raise kmock.KubernetesError(
            status=405, reason="MethodNotAllowed", message=f"{method} is not supported", details={}
        )

    def _admit(
        self, resource: kmock.resource, obj: dict[str, Any], old: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """Prune and validate ``obj`` as the resource's schema says; 422 if invalid."""
        errors = kube_schema.metadata_errors(obj, plural=resource.plural)
        schema = self._schemas.get(resource)
        if schema is not None:
            obj = kube_schema.prune(obj, schema)
            errors += kube_schema.validate(obj, schema)
        elif (resource.group, resource.plural) in kube_schema.BUILTIN_VALIDATED:
            meta = obj.get("metadata")
            if isinstance(meta, dict):
                obj["metadata"] = {
                    k: v for k, v in meta.items() if k in kube_schema.OBJECT_META_FIELDS
                }
            api_version = f"{resource.group}/{resource.version}" if resource.group else "v1"
            errors += kube_schema.builtin_errors(
                obj, kind=self._kind(resource), api_version=api_version
            )
        if old is not None and resource == _PODS:
            errors += kube_schema.pod_update_errors(old, obj)
        if resource.plural == "customresourcedefinitions" and not errors:
            errors += _crd_errors(obj)
        if errors:
            name = str((obj.get("metadata") or {}).get("name") or "")
            self.refused.append((resource.plural, name, [str(e) for e in errors]))
            status = kube_schema.invalid_status(self._kind(resource), resource.group, name, errors)
            raise kmock.KubernetesError(
                status=422, reason="Invalid", message=status["message"], details=status["details"]
            )
        return obj

    async def _create(
        self, request: rendering.Request, body: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        resource = request.resource
        assert resource is not None
        data = request.data if body is None else body
        if not isinstance(data, dict):
            raise _bad_request("the body of a create must be an object")
        obj = copy.deepcopy(data)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise _bad_request("metadata must be an object")
        info = self._info(resource)
        namespaced = info.namespaced if info is not None else bool(request.namespace)
        if namespaced:
            if not request.namespace:
                raise _bad_request("the namespace of the request is required")
            if meta.get("namespace") not in (None, "", request.namespace):
                raise _bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            meta["namespace"] = request.namespace
            if request.namespace not in self.namespaces:
                raise self._not_found(kmock.resource("", "v1", "namespaces"), request.namespace)
            if (self.namespace_meta.get(request.namespace) or {}).get("deletionTimestamp"):
                raise kmock.KubernetesError(
                    status=403,
                    reason="Forbidden",
                    message=f"{resource.plural} is forbidden: unable to create new content in "
                    f"namespace {request.namespace} because it is being terminated",
                    details={},
                )
        else:
            meta.pop("namespace", None)
        if not meta.get("name") and meta.get("generateName"):
            # As the API server: the prefix plus five random characters (retried on a clash).
            meta["name"] = str(meta["generateName"]) + "".join(
                random.choices(_GENERATED_NAME_CHARS, k=5)
            )
        for key in ("uid", "resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(key, None)
        if info is not None and info.kind:
            obj["kind"] = info.kind
            obj["apiVersion"] = (
                f"{resource.group}/{resource.version}" if resource.group else resource.version
            )
        if self._has_status_subresource(resource):
            obj.pop("status", None)
        if resource == _PODS:
            obj["status"] = {"phase": "Pending"}  # what the API server fills in
        obj = self._admit(resource, obj, None)
        meta = obj["metadata"]
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = _now()
        meta["generation"] = 1
        key = (resource, meta.get("namespace"), meta["name"])
        async with self._lock:
            if self._stored(*key) is not None:
                raise kmock.KubernetesError(
                    status=409,
                    reason="AlreadyExists",
                    message=f'{resource.plural} "{meta["name"]}" already exists',
                    details={"name": meta["name"], "kind": resource.plural},
                )
            if resource == _SERVICES:
                self._allocate_cluster_ip(obj, dry_run=request.params.get("dryRun") == "All")
            # RBAC's escalation check: a creator without `bind` (kubemill's operator has
            # none) may grant only what it holds, so the server looks the Role up, and
            # answers 404 while it is missing (found on the real kube-apiserver).
            role_ref = obj.get("roleRef") or {}
            if (
                resource.plural == "rolebindings"
                and role_ref.get("kind") == "Role"
                and self._stored(_ROLES, meta.get("namespace"), role_ref.get("name")) is None
            ):
                raise self._not_found(resource, meta["name"])
            if request.params.get("dryRun") == "All":
                return obj
            if resource.plural == "customresourcedefinitions":
                self._register_crd(obj)
            if key in self.objects:
                self.objects[key].create(obj)
            else:
                self.objects[key] = obj
            raw: dict[str, Any] = self.objects[key].raw
            await self._buses[resource].put({"type": "ADDED", "object": raw})
            return copy.deepcopy(self.objects[key].raw)

    def _applied_body(self, request: rendering.Request) -> dict[str, Any]:
        """The object of an apply patch, checked as the API server checks it (400/422)."""
        resource = request.resource
        assert resource is not None
        params = request.params
        if not params.get("fieldManager"):
            raise _invalid_options("fieldManager", "Required", "is required for apply patch")
        if params.get("force") not in (None, *_TRUE, *_FALSE):
            raise _bad_request(f"force: invalid boolean {params['force']!r}")
        if params.get("dryRun") not in (None, "All"):
            raise _invalid_options(
                "dryRun", "Unsupported", 'supported values: "All"', params["dryRun"]
            )
        body = request.data
        if body is None:
            try:
                body = yaml.safe_load(request.text)
            except yaml.YAMLError as exc:
                raise _bad_request(f"error decoding YAML: {exc}") from None
        if not isinstance(body, dict):
            raise _bad_request("an apply patch must be an object")
        info = self._info(resource)
        api_version = f"{resource.group}/{resource.version}" if resource.group else "v1"
        kind = info.kind if info is not None and info.kind else None
        if not body.get("kind"):
            raise _bad_request(f"Object 'Kind' is missing in '{request.text[:200]}'")
        if body.get("apiVersion") != api_version or (kind and body.get("kind") != kind):
            raise _bad_request(
                f"the API version in the data ({body.get('apiVersion')}) and kind "
                f"({body.get('kind')}) do not match the expected {api_version} {kind}"
            )
        meta = body.get("metadata")
        if not isinstance(meta, dict) or not meta.get("name"):
            raise _bad_request("metadata.name: Required value: name is required")
        if meta["name"] != request.name:
            raise _bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL "
                f"({request.name})"
            )
        if meta.get("namespace") not in (None, "", request.namespace):
            raise _bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        if meta.get("managedFields") is not None:
            raise _bad_request("metadata.managedFields must be nil")
        return body

    async def _apply(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        """Server-side apply: update the object, or create it when it does not exist."""
        resource = request.resource
        assert resource is not None
        body = self._applied_body(request)
        if self._stored(resource, request.namespace, request.name) is not None:
            return aiohttp.web.json_response(await self._update(request, applied=body))
        api_version = f"{resource.group}/{resource.version}" if resource.group else "v1"
        created = apply_fields(
            None,
            body,
            manager=str(request.params["fieldManager"]),
            force=True,
            api_version=api_version,
            skip_status=self._has_status_subresource(resource),
        )
        return aiohttp.web.json_response(await self._create(request, created), status=201)

    def _patched(self, request: rendering.Request, current: dict[str, Any]) -> dict[str, Any]:
        """The object a PATCH asks for (PUT: the body itself)."""
        data = request.data
        if request.method.value == "PUT":
            if not isinstance(data, dict):
                raise _bad_request("the body of an update must be an object")
            return copy.deepcopy(data)
        content_type = request.headers.get("Content-Type", "")
        try:
            if "json-patch" in content_type:
                if not isinstance(data, list):
                    raise _bad_request("a JSON patch must be a list of operations")
                patched = jsonpatch.apply_patch(copy.deepcopy(current), data)
            else:
                # merge-patch and (simplified: lists are replaced) strategic-merge and apply
                if not isinstance(data, dict):
                    raise _bad_request("a merge patch must be an object")
                patched = kmock_dicts.patch_dict(copy.deepcopy(current), data)
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException, ValueError) as exc:
            raise kmock.KubernetesError(
                status=422, reason="Invalid", message=f"the patch cannot be applied: {exc}",
                details={},
            ) from None  # fmt: skip
        return dict(patched)

    async def _update(
        self, request: rendering.Request, applied: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        resource = request.resource
        assert resource is not None
        api_version = f"{resource.group}/{resource.version}" if resource.group else "v1"
        async with self._lock:
            stored = self._stored(resource, request.namespace, request.name)
            if stored is None:
                raise self._not_found(resource, request.name)
            current: dict[str, Any] = copy.deepcopy(stored.raw)
            if applied is not None:
                new = apply_fields(
                    current,
                    applied,
                    manager=str(request.params["fieldManager"]),
                    force=request.params.get("force") in _TRUE,
                    api_version=api_version,
                    skip_status=self._has_status_subresource(resource),
                )
            else:
                new = self._patched(request, current)
            meta = new.get("metadata")
            if not isinstance(meta, dict):
                meta = new["metadata"] = {}
            old_meta = current["metadata"]
            if meta.get("name") not in (None, request.name):
                raise _bad_request(
                    f"the name of the object ({meta.get('name')}) does not match the name on "
                    f"the URL ({request.name})"
                )
            if meta.get("namespace") not in (None, "", old_meta.get("namespace")):
                raise _bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            if meta.get("uid") not in (None, "", old_meta.get("uid")):
                raise _conflict(
                    f"Precondition failed: UID in precondition: {meta.get('uid')}, "
                    f"UID in object meta: {old_meta.get('uid')}"
                )
            wanted_rv = meta.get("resourceVersion")
            if wanted_rv not in (None, "") and str(wanted_rv) != str(old_meta["resourceVersion"]):
                raise _conflict(
                    f'Operation cannot be fulfilled on {resource.plural} "{request.name}": the '
                    "object has been modified; please apply your changes to the latest "
                    "version and try again"
                )
            if (
                request.method.value == "PUT"
                and resource in self._schemas
                and wanted_rv in (None, "")
            ):
                error = kube_schema.FieldError(
                    "metadata.resourceVersion", "Invalid", 0, "must be specified for an update"
                )
                status = kube_schema.invalid_status(
                    self._kind(resource), resource.group, str(request.name), [error]
                )
                raise kmock.KubernetesError(
                    status=422,
                    reason="Invalid",
                    message=status["message"],
                    details=status["details"],
                )
            if self._has_status_subresource(resource):
                if request.subresource == "status":
                    # A status write changes the status and nothing else.
                    new = {k: v for k, v in current.items() if k != "status"} | (
                        {"status": new["status"]} if new.get("status") is not None else {}
                    )
                    meta = new["metadata"] = copy.deepcopy(old_meta)
                else:
                    new.pop("status", None)
                    if "status" in current:
                        new["status"] = current["status"]
            # What the server owns is kept, whatever the write says.
            for key in _SERVER_META:
                if key in old_meta:
                    meta[key] = old_meta[key]
                else:
                    meta.pop(key, None)
            meta["name"] = request.name
            if old_meta.get("namespace"):
                meta["namespace"] = old_meta["namespace"]
            if old_meta.get("deletionTimestamp") and any(
                f not in (old_meta.get("finalizers") or []) for f in meta.get("finalizers") or []
            ):
                error = kube_schema.FieldError(
                    "metadata.finalizers",
                    "Forbidden",
                    detail="no new finalizers can be added if the object is being deleted",
                )
                status = kube_schema.invalid_status(
                    self._kind(resource), resource.group, str(request.name), [error]
                )
                raise kmock.KubernetesError(
                    status=422,
                    reason="Invalid",
                    message=status["message"],
                    details=status["details"],
                )
            if resource == _SERVICES:
                self._keep_cluster_ip(current, new)
            if applied is None:
                record_update(current, new, manager=_manager_of(request), api_version=api_version)
            new = self._admit(resource, new, current)
            if new == current:
                return current  # no change: no new version, no event
            if request.subresource is None and _spec_of(new) != _spec_of(current):
                new["metadata"]["generation"] = int(old_meta.get("generation", 1)) + 1
            if request.params.get("dryRun") == "All":
                return new
            if _removable(new):
                # The last finalizer went (and a pod's kubelet is done): the object goes now.
                stored.history.append(new)
                await self._remove(resource, stored)
            else:
                stored.history.append(new)
                await self._buses[resource].put({"type": "MODIFIED", "object": stored.raw})
            result: dict[str, Any] = copy.deepcopy(stored.last.raw)
        await self._collect_if_gone(resource, result)
        return result

    def _refuse_service(self, name: str, error: kube_schema.FieldError) -> kmock.KubernetesError:
        status = kube_schema.invalid_status("Service", "", name, [error])
        self.refused.append(("services", name, [str(error)]))
        return kmock.KubernetesError(
            status=422, reason="Invalid", message=status["message"], details=status["details"]
        )

    def _allocate_cluster_ip(self, obj: dict[str, Any], *, dry_run: bool) -> None:
        """Give a new Service its cluster IP as the API server's allocator does (the caller
        holds the lock): the one asked for if free and in range, else the first free one."""
        spec = obj.get("spec")
        if not isinstance(spec, dict) or spec.get("type") == "ExternalName":
            return
        name = str(obj["metadata"].get("name") or "")
        asked = str(spec.get("clusterIP") or "")
        if asked == "None":
            spec["clusterIPs"] = ["None"]
            return
        if asked:
            path = "spec.clusterIPs[0]"
            try:
                address = ipaddress.ip_address(asked)
            except ValueError:
                detail = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
                raise self._refuse_service(
                    name, kube_schema.FieldError(path, "Invalid", asked, detail)
                ) from None
            if address not in SERVICE_CIDR:
                detail = (
                    "failed to allocate IP "
                    f"{asked}: provided IP is not in the valid range. The range of valid IPs "
                    f"is {SERVICE_CIDR}"
                )
                raise self._refuse_service(
                    name, kube_schema.FieldError(path, "Invalid", [asked], detail)
                )
            if asked in self._cluster_ips:
                detail = f"failed to allocate IP {asked}: provided IP is already allocated"
                raise self._refuse_service(
                    name, kube_schema.FieldError(path, "Invalid", [asked], detail)
                )
        else:
            # The first free host address (a real allocator picks at random: tests must
            # not expect a particular one).
            asked = next(str(ip) for ip in SERVICE_CIDR.hosts() if str(ip) not in self._cluster_ips)
        spec["clusterIP"] = asked
        spec["clusterIPs"] = [asked]
        if not dry_run:
            self._cluster_ips.add(asked)

    def _keep_cluster_ip(self, current: Mapping[str, Any], new: dict[str, Any]) -> None:
        """An update keeps a Service's cluster IP: left out, it is the stored one; changed,
        the update is refused, as the API server refuses it."""
        old_spec = current.get("spec") or {}
        spec = new.get("spec")
        allocated = old_spec.get("clusterIP")
        if not allocated or not isinstance(spec, dict) or spec.get("type") == "ExternalName":
            return
        wanted = spec.get("clusterIP")
        if wanted in (None, ""):
            spec["clusterIP"] = allocated
            spec["clusterIPs"] = list(old_spec.get("clusterIPs") or [allocated])
            return
        if wanted != allocated:
            name = str((current.get("metadata") or {}).get("name") or "")
            raise self._refuse_service(
                name,
                kube_schema.FieldError(
                    "spec.clusterIPs[0]", "Invalid", [wanted], "may not change once set"
                ),
            )
        spec.setdefault("clusterIPs", list(old_spec.get("clusterIPs") or [allocated]))

    async def _remove(self, resource: kmock.resource, stored: Any) -> None:
        """Remove a stored object for good (the caller holds the lock)."""
        raw = stored.raw
        if resource == _SERVICES:
            self._cluster_ips.discard(str((raw.get("spec") or {}).get("clusterIP") or ""))
        stored.delete()
        await self._buses[resource].put({"type": "DELETED", "object": raw})

    async def _collect_if_gone(self, resource: kmock.resource, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata", {})
        if self._stored(resource, meta.get("namespace"), meta.get("name")) is None:
            uid = meta.get("uid")
            if uid:
                await self.collect_garbage(uid)

    async def _delete(self, request: rendering.Request) -> dict[str, Any]:
        resource = request.resource
        assert resource is not None
        options = request.data if isinstance(request.data, dict) else {}
        grace = options.get("gracePeriodSeconds", request.params.get("gracePeriodSeconds"))
        propagation = options.get("propagationPolicy", request.params.get("propagationPolicy"))
        async with self._lock:
            stored = self._stored(resource, request.namespace, request.name)
            if stored is None:
                raise self._not_found(resource, request.name)
            meta = stored.raw.get("metadata", {})
            for key, value in (options.get("preconditions") or {}).items():
                if value and str(value) != str(meta.get(key)):
                    raise _conflict(
                        f"Precondition failed: {key} in precondition: {value}, {key} in object "
                        f"meta: {meta.get(key)}"
                    )
            result = await self._delete_stored(
                resource, stored, None if grace is None else int(grace)
            )
        if propagation != "Orphan":
            await self._collect_if_gone(resource, result)
        return result

    async def _delete_stored(
        self, resource: kmock.resource, stored: Any, grace: int | None
    ) -> dict[str, Any]:
        """Delete now, or mark as terminating (finalizers, a pod's grace period)."""
        current: dict[str, Any] = copy.deepcopy(stored.raw)
        meta = current["metadata"]
        if resource == _PODS and self.graceful_pods:
            spec, status = current.get("spec") or {}, current.get("status") or {}
            if grace is None:
                grace = spec.get("terminationGracePeriodSeconds", 30)
            if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
                grace = 0  # nothing runs it (unscheduled) or nothing runs any more
        else:
            grace = 0
        if meta.get("deletionTimestamp"):
            if grace == 0 and resource == _PODS:
                await self._kubelet_done(stored)  # the kubelet's (or a forced) final delete
            return copy.deepcopy(stored.last.raw)
        if grace or meta.get("finalizers"):
            moment = datetime.datetime.now(tz=datetime.UTC) + datetime.timedelta(seconds=grace)
            meta["deletionTimestamp"] = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
            if resource == _PODS:
                meta["deletionGracePeriodSeconds"] = grace
            stored.history.append(current)
            await self._buses[resource].put({"type": "MODIFIED", "object": stored.raw})
            if grace and self.kubelet_finishes_after is not None:
                delay = min(float(grace), self.kubelet_finishes_after)
                task = asyncio.create_task(self._finish_later(stored, meta["uid"], delay))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            return copy.deepcopy(stored.raw)
        await self._remove(resource, stored)
        return current

    async def _kubelet_done(self, stored: Any) -> bool:
        """A terminating pod's containers have stopped: it goes, or (held by finalizers)
        waits for them with a zero grace period. The caller holds the lock."""
        meta = stored.raw.get("metadata", {})
        if meta.get("finalizers"):
            if meta.get("deletionGracePeriodSeconds"):
                pod = copy.deepcopy(stored.raw)
                pod["metadata"]["deletionGracePeriodSeconds"] = 0
                stored.history.append(pod)
                await self._buses[_PODS].put({"type": "MODIFIED", "object": stored.raw})
            return False
        await self._remove(_PODS, stored)
        return True

    async def _finish_later(self, stored: Any, uid: str, delay: float) -> None:
        await asyncio.sleep(delay)
        async with self._lock:
            if stored.deleted or stored.raw.get("metadata", {}).get("uid") != uid:
                return
            raw = copy.deepcopy(stored.raw)
            await self._kubelet_done(stored)
        await self._collect_if_gone(_PODS, raw)

    async def _bind_request(self, request: rendering.Request) -> dict[str, Any]:
        target = (request.data or {}).get("target") if isinstance(request.data, dict) else None
        node = (target or {}).get("name")
        if not node:
            raise _bad_request("a binding needs target.name")
        await self.bind(str(request.namespace), str(request.name), str(node))
        return {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}

    def _register_crd(self, crd: Mapping[str, Any]) -> None:
        spec = crd.get("spec", {})
        names = spec.get("names", {})
        for version in spec.get("versions", []):
            if not version.get("served", True):
                continue
            resource = kmock.resource(spec["group"], version["name"], names["plural"])
            self.resources[resource] = kmock.ResourceInfo(
                kind=names.get("kind"),
                singular=names.get("singular") or names.get("kind", "").lower(),
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                verbs={"get", "list", "watch", "create", "update", "patch", "delete"},
                shortnames=set(names.get("shortNames", [])),
                subresources=set((version.get("subresources") or {}).keys()),
            )
            schema = (version.get("schema") or {}).get("openAPIV3Schema")
            if schema is not None:
                self._schemas[resource] = schema

    def install_crds(self, crds: list[Mapping[str, Any]]) -> None:
        """Register CRDs in discovery directly (as if created before the test)."""
        for crd in crds:
            self._register_crd(crd)

    # -- after a change ------------------------------------------------------------------------

    async def _record_change(self, resource: kmock.resource, event: dict[str, Any]) -> None:
        """Give every change a new resourceVersion and keep it for watches that resume."""
        rv = next(self._rv)
        self._last_rv = rv
        obj = dict(event["object"])
        meta = dict(obj.get("metadata", {}))
        meta["resourceVersion"] = str(rv)
        obj["metadata"] = meta
        event["object"] = obj
        if event["type"] != "DELETED":
            key = (resource, meta.get("namespace"), meta.get("name"))
            if key in self.objects and not self.objects[key].deleted:
                self.objects[key]["metadata"] = meta
        self._history.setdefault(resource, []).append((rv, event))
        if self._changed is None:
            self._changed = asyncio.Condition()
        async with self._changed:
            self._changed.notify_all()

    async def collect_garbage(self, owner_uid: str) -> None:
        """Delete the dependents of a removed owner (background propagation), each as a
        DELETE would: a running pod gets its grace period, finalizers hold an object."""
        removed = []
        async with self._lock:
            dependents = []
            for (resource, _namespace, _name), obj in list(self.objects.items()):
                if obj.deleted:
                    continue
                refs = obj.get("metadata", {}).get("ownerReferences") or []
                if any(ref.get("uid") == owner_uid for ref in refs):
                    dependents.append((resource, obj))
            for resource, obj in dependents:
                if obj.raw.get("metadata", {}).get("deletionTimestamp"):
                    continue
                result = await self._delete_stored(resource, obj, None)
                if obj.deleted:
                    removed.append(result["metadata"].get("uid"))
        for uid in removed:
            if uid:
                await self.collect_garbage(uid)

    # -- test controls (acting as scheduler and kubelet) -----------------------------------------

    async def bind(self, namespace: str, name: str, node: str = "node-1") -> None:
        """Bind a pod to a node, as the scheduler does (``pods/binding``)."""
        async with self._lock:
            stored = self._stored(_PODS, namespace, name)
            if stored is None:
                raise self._not_found(_PODS, name)
            pod = copy.deepcopy(stored.raw)
            if pod.get("spec", {}).get("nodeName"):
                if pod["spec"]["nodeName"] == node:
                    return
                raise _conflict(
                    f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"'
                )
            pod.setdefault("spec", {})["nodeName"] = node
            stored.history.append(pod)
            await self._buses[_PODS].put({"type": "MODIFIED", "object": stored.raw})

    async def finish_terminating(
        self, namespace: str | None = None, name: str | None = None
    ) -> list[str]:
        """End terminating pods, as their kubelet does once the containers stopped; returns
        the names of the pods removed (a pod held by finalizers stays until they go)."""
        done = []
        async with self._lock:
            for (resource, ns, pod), obj in list(self.objects.items()):
                if resource != _PODS or obj.deleted:
                    continue
                if (namespace is not None and ns != namespace) or (
                    name is not None and pod != name
                ):
                    continue
                if obj.raw.get("metadata", {}).get("deletionTimestamp"):
                    raw = copy.deepcopy(obj.raw)
                    if await self._kubelet_done(obj):
                        done.append((pod, raw))
        for _, raw in done:
            await self._collect_if_gone(_PODS, raw)
        return [pod for pod, _ in done]

    def terminating(self, namespace: str | None = None) -> list[str]:
        """Names of the pods that are terminating (deleted, still there)."""
        return sorted(
            pod
            for (resource, ns, pod), obj in list(self.objects.items())
            if resource == _PODS
            and not obj.deleted
            and (namespace is None or ns == namespace)
            and obj.raw.get("metadata", {}).get("deletionTimestamp")
        )

    # -- reading -------------------------------------------------------------------------------

    async def _serve_list(self, request: rendering.Request) -> rendering.Payload:
        payload = await super()._serve_list(request)
        assert isinstance(payload, dict) and request.resource is not None
        resource = request.resource
        info = self._info(resource)
        kind = info.kind if info is not None and info.kind else resource.plural.capitalize()
        return {
            "apiVersion": f"{resource.group}/{resource.version}"
            if resource.group
            else resource.version,
            "kind": f"{kind}List",
            "metadata": {"resourceVersion": str(self._last_rv)},
            "items": [obj for obj in payload["items"] if _selected(obj, request.params)],
        }

    # kmock finds the object of a fetch/create/patch/delete by scanning every stored object;
    # with thousands of objects (the benchmark) that dominates. Look it up by key instead.

    def _object(self, request: rendering.Request, *, from_body: bool = False) -> Any:
        namespace, name = request.namespace, request.name
        if from_body and isinstance(request.data, dict):
            meta = request.data.get("metadata") or {}
            namespace, name = namespace or meta.get("namespace"), name or meta.get("name")
        key = (request.resource, namespace, name)
        return self.objects[key] if name and key in self.objects else None

    async def _serve_fetch(self, request: rendering.Request) -> rendering.Payload:
        obj = self._object(request)
        if obj is None or obj.deleted:
            raise kmock.KubernetesObjectNotFoundError()
        raw: dict[str, Any] = obj.raw
        return raw

    async def _serve_version(self, request: rendering.Request) -> rendering.Payload:
        payload = await super()._serve_version(request)
        if isinstance(payload, dict) and request.resource and not request.resource.group:
            payload["groupVersion"] = request.resource.version  # kmock says "/v1"
        return payload

    def _watched(self, request: rendering.Request, event: Mapping[str, Any]) -> bool:
        meta = event["object"].get("metadata", {})
        if request.namespace is not None and meta.get("namespace") != request.namespace:
            return False
        if request.name is not None and meta.get("name") != request.name:
            return False
        return _selected(event["object"], request.params)

    async def _serve_watch(self, request: rendering.Request) -> AsyncIterator[rendering.Payload]:
        yield b""  # send the headers now: the stream is open even if nothing happens
        assert request.resource is not None
        if self._changed is None:
            self._changed = asyncio.Condition()
        epoch = self._watch_epoch
        history = self._history.setdefault(request.resource, [])
        since = request.params.get("resourceVersion")
        if since and since != "0":
            if int(since) < self._compacted_rv:
                self.expired_watches += 1
                yield {
                    "type": "ERROR",
                    "object": {
                        "apiVersion": "v1",
                        "kind": "Status",
                        "status": "Failure",
                        "code": 410,
                        "reason": "Expired",
                        "message": f"too old resource version: {since} ({self._compacted_rv})",
                    },
                }
                return
            position = next(
                (i for i, (rv, _) in enumerate(history) if rv > int(since)), len(history)
            )
        else:  # no version: the current state first, as ADDED events
            async with self._lock:
                current = [
                    {"type": "ADDED", "object": obj.raw}
                    for (resource, _ns, _name), obj in list(self.objects.items())
                    if resource == request.resource and not obj.deleted
                ]
                position = len(history)
            for event in current:
                if self._watched(request, event):
                    yield event
        while True:
            while position < len(history):
                _, event = history[position]
                position += 1
                if self._watched(request, event):
                    yield event
            seen = position
            async with self._changed:
                await self._changed.wait_for(
                    lambda seen=seen: len(history) > seen or self._watch_epoch != epoch
                )
            if self._watch_epoch != epoch:
                return  # dropped by the test: the client must reconnect

    async def _serve_token_review(self, raw: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        """A TokenReview (created, never stored), answered from :attr:`token_reviews`."""
        text = (await raw.read()).decode()
        request = rendering.Request(
            method=raw.method,
            url=raw.url,
            params=dict(raw.query),
            headers=dict(raw.headers),
            text=text,
            resource=kmock.resource("authentication.k8s.io", "v1", "tokenreviews"),
        )
        self._log(request, 201)
        spec = json.loads(text).get("spec") or {}
        status = copy.deepcopy(self.token_reviews.get(spec.get("token", ""), {}))
        asked = set(spec.get("audiences") or ())
        if asked and not asked & set(status.get("audiences") or ()):
            status = {}
        status = status or {"authenticated": False, "error": "invalid bearer token"}
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview"}
        return aiohttp.web.json_response({**review, "spec": spec, "status": status}, status=201)

    async def _serve_namespaces(self, raw: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        parts = raw.path.rstrip("/").split("/")
        name = parts[4] if len(parts) > 4 else None
        text = (await raw.read()).decode() if raw.method == "PATCH" else ""
        request = rendering.Request(
            method=raw.method,
            url=raw.url,
            params=dict(raw.query),
            headers=dict(raw.headers),
            text=text,
            resource=kmock.resource("", "v1", "namespaces"),
            name=name,
        )
        self._log(request, 200)

        def body(ns: str) -> dict[str, Any]:
            meta = {"name": ns, "resourceVersion": "1", "uid": f"ns-{ns}"}
            meta |= copy.deepcopy(self.namespace_meta.get(ns) or {})
            phase = "Terminating" if meta.get("deletionTimestamp") else "Active"
            return {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": meta,
                "status": {"phase": phase},
            }

        if raw.method == "PATCH" and name and _is_apply(request):
            applied = self._applied_body(request)
            existed = name in self.namespaces
            current = body(name) if existed else None
            new = apply_fields(
                current, applied, manager=str(request.params["fieldManager"]),
                force=request.params.get("force") in _TRUE, api_version="v1", skip_status=True,
            )  # fmt: skip
            kept = {k: v for k, v in new["metadata"].items() if k not in _UNTRACKED_META}
            kept["managedFields"] = new["metadata"].get("managedFields", [])
            if request.params.get("dryRun") == "All":
                return aiohttp.web.json_response(new, status=200 if existed else 201)
            old = self.namespace_meta.get(name) or {}
            kept |= {k: v for k, v in old.items() if k == "deletionTimestamp"}
            if kept != {k: v for k, v in old.items() if k != "resourceVersion"} or not existed:
                self.namespaces.add(name)
                self.namespace_meta[name] = kept
                await self._buses[kmock.resource("", "v1", "namespaces")].put(
                    {"type": "MODIFIED" if existed else "ADDED", "object": body(name)}
                )
                self.namespace_meta[name]["resourceVersion"] = str(self._last_rv)
            return aiohttp.web.json_response(body(name), status=200 if existed else 201)
        if raw.method == "DELETE" and name:
            if name not in self.namespaces:
                return aiohttp.web.json_response({"kind": "Status", "code": 404}, status=404)
            held = any(ns == name and not obj.deleted for (_, ns, _), obj in self.objects.items())
            if held:
                # The namespace controller would delete the contents; there is none here.
                self.namespace_meta.setdefault(name, {})["deletionTimestamp"] = _now()
                return aiohttp.web.json_response(body(name))
            gone = body(name)
            self.namespaces.discard(name)
            self.namespace_meta.pop(name, None)
            return aiohttp.web.json_response(gone)

        if raw.method == "POST" and not name:
            created = json.loads(await raw.read() or b"{}").get("metadata", {}).get("name", "")
            if created in self.namespaces:
                return aiohttp.web.json_response({"kind": "Status", "code": 409}, status=409)
            self.namespaces.add(created)
            return aiohttp.web.json_response(body(created), status=201)
        if raw.method != "GET":
            return aiohttp.web.json_response({"kind": "Status", "code": 405}, status=405)
        if name:
            if name not in self.namespaces:
                return aiohttp.web.json_response({"kind": "Status", "code": 404}, status=404)
            return aiohttp.web.json_response(body(name))
        if raw.query.get("watch") in ("true", "1"):
            response = aiohttp.web.StreamResponse()
            await response.prepare(raw)
            sent: set[str] = set()
            epoch = self._watch_epoch
            while self._watch_epoch == epoch:  # namespaces are few: poll for new ones
                for ns in sorted(self.namespaces - sent):
                    line = json.dumps({"type": "ADDED", "object": body(ns)}) + "\n"
                    await response.write(line.encode())
                    sent.add(ns)
                await asyncio.sleep(0.1)
            return response
        return aiohttp.web.json_response(
            {
                "apiVersion": "v1",
                "kind": "NamespaceList",
                "metadata": {"resourceVersion": str(self._last_rv)},
                "items": [body(ns) for ns in sorted(self.namespaces)],
            }
        )

    # -- pods/exec: the API server's part real, the kubelet's emulated --------------------------

    async def _serve_exec(
        self, raw: aiohttp.web.BaseRequest, namespace: str, pod_name: str
    ) -> aiohttp.web.StreamResponse:
        """``GET|POST .../pods/{name}/exec``: run a command in the pod over a websocket.

        The checks are kube-apiserver's and the kubelet's, in their order: the options
        (``command`` repeated, ``container``, and the ``stdin``/``stdout``/``stderr``/``tty``
        flags, absent meaning false), the pod (404), the container (named, or the only one;
        400), a pod that runs (bound, ``Running``, the container not terminated; 400), then
        the websocket upgrade with the ``v4.channel.k8s.io`` subprotocol (channels 0 stdin,
        1 stdout, 2 stderr, 3 the final ``Status``, 4 resize). The command then runs as a
        local process in a session of its own, in the pod's environment
        (:meth:`_exec_environment`); with ``tty`` (no terminal here) stderr goes to stdout,
        as on a terminal. A command that cannot be started gets the runtime's answer:
        the reason on stderr and exit code 126 (127 when not found). The process group is
        killed when the client closes the stream, when the command exits (what it left
        behind), and when the cluster stops.
        """
        query = raw.query
        command = list(query.getall("command", []))
        call = Call(
            method=raw.method,
            path=raw.path,
            group="",
            version="v1",
            plural="pods",
            namespace=namespace,
            name=pod_name,
            subresource="exec",
            watch=False,
            status=0,
            user_agent=raw.headers.get("User-Agent", ""),
            params={k: v for k, v in query.items() if k != "command"},
            body=command,
        )
        self.calls.append(call)
        try:
            if raw.method not in ("GET", "POST"):
                raise _ExecRefused(405, "MethodNotAllowed", f"{raw.method} is not allowed")
            flags = {name: _exec_flag(query, name) for name in _EXEC_FLAGS}
            stored = self._stored(_PODS, namespace, pod_name)
            if stored is None:
                raise _ExecRefused(404, "NotFound", f'pods "{pod_name}" not found')
            pod: dict[str, Any] = copy.deepcopy(stored.raw)
            container = _exec_container(pod, query.get("container"))
            _check_running(pod, container)
            if not command:
                raise _ExecRefused(400, "BadRequest", _NO_COMMAND)
            if not (flags["stdin"] or flags["stdout"] or flags["stderr"]):
                raise _ExecRefused(400, "BadRequest", _NO_STREAMS)
            if raw.headers.get("Upgrade", "").lower() != "websocket":
                # SPDY (a POST upgrade) is not spoken here; websocket clients send GET
                raise _ExecRefused(400, "BadRequest", "Upgrade request required")
            if raw.method != "GET":
                raise _ExecRefused(400, "BadRequest", "a websocket upgrade must be a GET")
            offered = {p.strip() for p in raw.headers.get("Sec-WebSocket-Protocol", "").split(",")}
            if _EXEC_PROTOCOL not in offered:
                raise _ExecRefused(
                    400, "BadRequest", f"the test API server speaks only {_EXEC_PROTOCOL}"
                )
        except _ExecRefused as refused:
            call.status = refused.code
            return aiohttp.web.json_response(refused.status(), status=refused.code)
        ws = aiohttp.web.WebSocketResponse(protocols=(_EXEC_PROTOCOL,))
        await ws.prepare(raw)
        call.status = 101
        env, cwd = self._exec_environment(namespace, pod, container)
        await self._run_exec(ws, command, env, cwd, flags)
        return ws

    def _exec_environment(
        self, namespace: str, pod: Mapping[str, Any], container: str
    ) -> tuple[dict[str, str], Path]:
        """The environment a command exec'd in the pod's container gets, and its working dir.

        This process's own environment stands in for the image's (PATH, the Python that
        runs the tests); then ``HOSTNAME`` (the pod's name, as in a container), the
        container's ``env`` entries with a plain ``value`` (``valueFrom`` needs the
        cluster: skipped), a working dir and a ``TMPDIR`` of the pod's own (also
        ``OMPI_MCA_btl_vader_backing_directory``: two OpenMPI "hosts" on one machine must
        not share shared-memory segments), and last what the test registered in
        :attr:`exec_environment` for ``(namespace, pod)``. The container's ``workingDir``
        names a path in its image, which does not exist here: the pod's own dir replaces it.
        """
        meta = pod.get("metadata") or {}
        name = str(meta.get("name"))
        if self.exec_root is None:
            self.exec_root = Path(tempfile.mkdtemp(prefix="kmock-exec-"))
        home = self.exec_root / namespace / f"{name}-{str(meta.get('uid', ''))[:8]}"
        workdir, tmp = home / "work", home / "tmp"
        workdir.mkdir(parents=True, exist_ok=True)
        tmp.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env["HOSTNAME"] = name
        spec = pod.get("spec") or {}
        for entry in _pod_containers(spec).get(container, {}).get("env") or []:
            if "value" in entry or "valueFrom" not in entry:
                env[str(entry["name"])] = str(entry.get("value", ""))
        env["TMPDIR"] = str(tmp)
        env["OMPI_MCA_btl_vader_backing_directory"] = str(tmp)
        env.update(self.exec_environment.get((namespace, name), {}))
        return env, workdir

    async def _run_exec(
        self,
        ws: aiohttp.web.WebSocketResponse,
        command: list[str],
        env: dict[str, str],
        cwd: Path,
        flags: Mapping[str, bool],
    ) -> None:
        pipe, devnull = asyncio.subprocess.PIPE, asyncio.subprocess.DEVNULL
        stderr_to = asyncio.subprocess.STDOUT if flags["tty"] else pipe
        try:
            proc = await asyncio.create_subprocess_exec(
                *command,
                stdin=pipe if flags["stdin"] else devnull,
                stdout=pipe if flags["stdout"] or flags["tty"] else devnull,
                stderr=stderr_to if flags["stderr"] else devnull,
                cwd=cwd,
                env=env,
                start_new_session=True,  # its own process group: stopped as one
            )
        except OSError as exc:
            code = 127 if isinstance(exc, FileNotFoundError) else 126
            reason = f"exec failed: unable to start container process: {command[0]}: {exc}\n"
            with contextlib.suppress(ConnectionError, RuntimeError):
                await ws.send_bytes(bytes([2]) + reason.encode())
                await ws.send_bytes(bytes([3]) + status_json(command, V4, code))
                await ws.close()
            return
        self._execs.add(proc)

        async def pump(stream: asyncio.StreamReader | None, channel: int) -> None:
            if stream is None:
                return
            while chunk := await stream.read(65536):
                with contextlib.suppress(ConnectionError, RuntimeError):
                    await ws.send_bytes(bytes([channel]) + chunk)

        async def from_client() -> None:
            async for message in ws:
                if message.type not in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT):
                    continue
                data = message.data if isinstance(message.data, bytes) else message.data.encode()
                if data[:1] == b"\x00" and proc.stdin is not None:
                    with contextlib.suppress(ConnectionError):
                        proc.stdin.write(data[1:])
                        await proc.stdin.drain()
                # channel 4 (resize) means nothing without a terminal

        pumps = [
            asyncio.create_task(pump(proc.stdout, 1)),
            asyncio.create_task(pump(proc.stderr, 2)),
        ]
        exited = asyncio.create_task(proc.wait())
        client = asyncio.create_task(from_client())
        try:
            await asyncio.wait({exited, client}, return_when=asyncio.FIRST_COMPLETED)
            if not exited.done():  # the client went away: stop the command
                await _end_process_group(proc)
                return
            # What it started may hold the pipes open a little longer; not forever.
            _, pending = await asyncio.wait(pumps, timeout=_EXEC_DRAIN_SECONDS)
            if pending:
                await _end_process_group(proc)
                await asyncio.wait(pumps)
            code = exit_code(proc.returncode if proc.returncode is not None else 1)
            with contextlib.suppress(ConnectionError, RuntimeError):
                await ws.send_bytes(bytes([3]) + status_json(command, V4, code))
                await ws.close()
        finally:
            for task in (*pumps, exited, client):
                task.cancel()
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # whatever it left behind
            if proc.returncode is None:
                await _end_process_group(proc)
            self._execs.discard(proc)

    async def stop_execs(self) -> None:
        """Stop every command still running through exec (the cluster is stopping)."""
        for proc in list(self._execs):
            await _end_process_group(proc)
            self._execs.discard(proc)

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.stop_execs()
        if self.exec_root is not None:
            shutil.rmtree(self.exec_root, ignore_errors=True)
            self.exec_root = None
        await super().__aexit__(*exc_info)

    # -- test controls ---------------------------------------------------------------------------

    async def drop_watches(self) -> None:
        """End every open watch stream, as an API server restart or a load balancer would."""
        self._watch_epoch += 1
        if self._changed is not None:
            async with self._changed:
                self._changed.notify_all()

    async def compact(self) -> None:
        """Forget history: watches resuming from an older version get ``410 Gone``."""
        self._compacted_rv = self._last_rv
        for history in self._history.values():
            history.clear()


# --- serving it from a thread --------------------------------------------------------------


class ClusterThread:
    """Serve a :class:`KubeCluster` on 127.0.0.1 from a background thread, for sync tests."""

    def __init__(self) -> None:
        self.cluster = KubeCluster()
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self.url = ""
        self._thread = threading.Thread(target=self._run, name="kmock-cluster", daemon=True)

    def __enter__(self) -> ClusterThread:
        self._thread.start()
        if not self._ready.wait(timeout=30) or self._error is not None:
            raise RuntimeError(f"the kmock cluster did not start: {self._error!r}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=30)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._serve())
        except BaseException as exc:  # reported to __enter__
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with self.cluster, kmock.Server(self.cluster) as server:
            self.url = f"http://127.0.0.1:{server.port}"
            self._ready.set()
            await self._stop.wait()
            await self.cluster.drop_watches()
            await self.cluster.stop_execs()  # before the server waits for its handlers

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run a coroutine function of the cluster on its loop and wait for the result."""
        return asyncio.run_coroutine_threadsafe(fn(), self.loop).result(timeout=30)

    # -- a tiny client for the tests (acting as user, kubelet and controllers) ------------------

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> Any:
        url = self.url + path + (("?" + urllib.parse.urlencode(params)) if params else "")
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("User-Agent", TEST_USER_AGENT)
        req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            raise ApiError(exc.code, exc.read().decode(errors="replace")) from None

    def create(self, path: str, obj: Mapping[str, Any]) -> Any:
        return self.request("POST", path, obj)

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def get_or_none(self, path: str) -> Any:
        try:
            return self.get(path)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def list(self, path: str, *, labels: str | None = None) -> list[dict[str, Any]]:
        params = {"labelSelector": labels} if labels else None
        items: list[dict[str, Any]] = self.request("GET", path, params=params)["items"]
        return items

    def patch(self, path: str, patch: Mapping[str, Any]) -> Any:
        return self.request("PATCH", path, patch, content_type="application/merge-patch+json")

    def delete(self, path: str, *, grace: int | None = None) -> Any:
        params = {"gracePeriodSeconds": str(grace)} if grace is not None else None
        return self.request("DELETE", path, params=params)

    def create_namespaces(self, *names: str) -> None:
        """Create namespaces a test uses beyond those of a fresh cluster (``default``,
        ``kube-system``, ...): a create in a missing namespace is ``404`` as on a cluster."""
        for name in names:
            self.create("/api/v1/namespaces", {"metadata": {"name": name}})

    def bind(self, namespace: str, pod: str, node: str = "node-1") -> Any:
        """Bind a pod to a node, as the scheduler does."""
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        return self.request("POST", f"/api/v1/namespaces/{namespace}/pods/{pod}/binding", binding)

    def finish_terminating(self, namespace: str | None = None, name: str | None = None) -> Any:
        """End the Terminating window of deleted pods, as their kubelet does."""
        return self.call(lambda: self.cluster.finish_terminating(namespace, name))

    def calls(self) -> list[Call]:
        return list(self.cluster.calls)

    def operator_calls(self, *, namespace: str | None = None) -> list[Call]:
        """The calls not made by the tests themselves, optionally in one namespace."""
        return [
            c
            for c in self.cluster.calls
            if not c.from_tests and (namespace is None or c.namespace == namespace)
        ]


class ApiError(Exception):
    """An error answer of the cluster to a test's own request."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"{status}: {body[:300]}")
        self.status = status
        self.body = body


def write_kubeconfig(path: Path, url: str) -> Path:
    """A kubeconfig that points kopf and the kubernetes client at ``url`` (no auth, no TLS)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kmock", "cluster": {"server": url}}],
        "users": [{"name": "tests", "user": {"token": "test-token"}}],
        "contexts": [
            {
                "name": "kmock",
                "context": {"cluster": "kmock", "user": "tests", "namespace": "default"},
            }
        ],
        "current-context": "kmock",
    }
    path.write_text(yaml.safe_dump(config))
    return path


@contextlib.contextmanager
def serving() -> Iterator[ClusterThread]:
    """A fresh cluster served for the duration of the ``with`` block."""
    with ClusterThread() as thread:
        yield thread
