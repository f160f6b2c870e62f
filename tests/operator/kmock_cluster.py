"""A Kubernetes API for operator tests: kmock's emulator plus what kmock 0.8 leaves out.

kmock (``kmock.KubernetesEmulator``) stores objects, serves list/watch/fetch/create/patch/
delete over real HTTP and honours finalizers. A real API server does more, and the operator
depends on some of it (see shared/notes/kmock-gaps.md). :class:`KubeCluster` subclasses
the emulator (kmock's documented extension point: "inherit and implement for your cases")
and adds, for tests only:

- ``metadata.uid``, ``resourceVersion`` (one global counter, as etcd), ``creationTimestamp``,
  ``generation`` and ``namespace`` from the URL on create; ``201 Created``; ``409
  AlreadyExists`` on a duplicate create;
- status-subresource semantics (``PATCH .../status`` changes only ``status``, a main-resource
  PATCH never does), optimistic concurrency on ``metadata.resourceVersion`` and delete
  preconditions (``409 Conflict``);
- label and field selectors on list and watch, ``kind``/``apiVersion`` on lists, the list's
  ``resourceVersion``; watches that resume from a resourceVersion, and ``410 Gone`` (an
  ``ERROR`` event) for versions older than the last :meth:`KubeCluster.compact`;
- ``/api/v1/namespaces`` (list, watch, get), CRDs that register their resources in discovery
  when created, background garbage collection of dependents by ``ownerReferences``;
- a log of every request (:class:`Call`), injected faults (:class:`Fault`), gates that hold
  matching requests until released (:class:`Gate`), and dropping all watch connections.

:class:`ClusterThread` serves a cluster on 127.0.0.1 from a background thread and gives the
(synchronous) tests a small client; requests it sends carry the ``kubemill-tests`` user
agent so the operator's own calls can be told apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime
import itertools
import json
import re
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
import kmock
import yaml
from kmock._internal import aiobus, rendering  # the emulator's own types, for overriding it
from kmock._internal import dicts as kmock_dicts

TEST_USER_AGENT = "kubemill-tests"

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
        )

    def open(self) -> None:
        self._opened.set()


# --- the cluster -----------------------------------------------------------------------------


def _now() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
    namespaces: set[str] = attrs.field(factory=lambda: {"default", "kube-system"}, init=False)
    _rv: Iterator[int] = attrs.field(factory=lambda: itertools.count(1), init=False)
    _last_rv: int = attrs.field(default=0, init=False)
    _compacted_rv: int = attrs.field(default=0, init=False)
    _history: dict[Any, list[tuple[int, dict[str, Any]]]] = attrs.field(factory=dict, init=False)
    _changed: asyncio.Condition | None = attrs.field(default=None, init=False)
    _watch_epoch: int = attrs.field(default=0, init=False)
    _in_flight: set[int] = attrs.field(factory=set, init=False)
    expired_watches: int = attrs.field(default=0, init=False)
    """Watches answered with 410 Gone (resumed from a compacted resourceVersion)."""

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
            shortcut = None
            if request.method.value == "PUT" and request.resource is not None and request.name:
                shortcut = await self._serve_replace(request)
            elif request.resource is not None and request.resource.plural:
                shortcut = self._prepare(request)
            response = shortcut or await super()._handle(request)
            if request.action == kmock.action.CREATE and response.status == 200:
                response.set_status(201)
            if request.action == kmock.action.DELETE:
                await self._after_delete(request)
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

    # -- what a real API server does before storing --------------------------------------------

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

    def _prepare(self, request: rendering.Request) -> aiohttp.web.Response | None:
        """Fill in and check a write as an API server would; answer no-op patches directly."""
        resource = request.resource
        assert resource is not None
        data = request.data
        if request.action == kmock.action.CREATE and isinstance(data, dict):
            meta = data.setdefault("metadata", {})
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
            info = self._info(resource)
            if request.namespace:
                meta["namespace"] = request.namespace
                self.namespaces.add(request.namespace)
            elif info is not None and info.namespaced:
                raise kmock.KubernetesError(
                    status=400, reason="BadRequest", message="namespace required", details={}
                )
            if self._stored(resource, meta.get("namespace"), meta.get("name")) is not None:
                raise kmock.KubernetesError(
                    status=409,
                    reason="AlreadyExists",
                    message=f'{resource.plural} "{meta.get("name")}" already exists',
                    details={"name": meta.get("name"), "kind": resource.plural},
                )
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = _now()
            meta["generation"] = 1
            meta.pop("resourceVersion", None)
            if info is not None and info.kind:
                data.setdefault("kind", info.kind)
                data.setdefault(
                    "apiVersion",
                    f"{resource.group}/{resource.version}" if resource.group else resource.version,
                )
            if self._has_status_subresource(resource):
                data.pop("status", None)
            if resource.plural == "customresourcedefinitions":
                self._register_crd(data)
        elif request.action == kmock.action.UPDATE:
            stored = self._stored(resource, request.namespace, request.name)
            if stored is None:
                raise kmock.KubernetesObjectNotFoundError()
            if isinstance(data, dict):
                wanted_rv = (data.get("metadata") or {}).pop("resourceVersion", None)
                current_rv = stored.get("metadata", {}).get("resourceVersion")
                if wanted_rv is not None and str(wanted_rv) != str(current_rv):
                    raise kmock.KubernetesError(
                        status=409,
                        reason="Conflict",
                        message="the object has been modified; please apply your changes to "
                        "the latest version and try again",
                        details={},
                    )
                if self._has_status_subresource(resource):
                    if request.subresource == "status":
                        kept = {"status": data["status"]} if "status" in data else {}
                        data.clear()
                        data.update(kept)
                    elif request.subresource is None:
                        data.pop("status", None)
                current = stored.raw
                merged = kmock_dicts.patch_dict(copy.deepcopy(current), data)
                if merged == current:
                    return aiohttp.web.json_response(current)  # no change: no new version
                if request.subresource is None and merged.get("spec") != current.get("spec"):
                    generation = int(current.get("metadata", {}).get("generation", 1)) + 1
                    data.setdefault("metadata", {})["generation"] = generation
        elif request.action == kmock.action.DELETE:
            stored = self._stored(resource, request.namespace, request.name)
            preconditions = (data or {}).get("preconditions") if isinstance(data, dict) else None
            if stored is not None and preconditions:
                meta = stored.get("metadata", {})
                for key in ("uid", "resourceVersion"):
                    if preconditions.get(key) and str(preconditions[key]) != str(meta.get(key)):
                        raise kmock.KubernetesError(
                            status=409,
                            reason="Conflict",
                            message=f"Precondition failed: {key} in precondition: "
                            f"{preconditions[key]}, {key} in object meta: {meta.get(key)}",
                            details={},
                        )
        return None

    async def _serve_replace(self, request: rendering.Request) -> aiohttp.web.Response:
        """PUT: replace the object (kmock has no update verb), with the same rules as PATCH."""
        resource = request.resource
        data = request.data if isinstance(request.data, dict) else {}
        async with self._lock:
            stored = self._stored(resource, request.namespace, request.name)
            if stored is None:
                raise kmock.KubernetesObjectNotFoundError()
            current = stored.raw
            meta = dict(data.get("metadata") or {})
            wanted_rv = meta.pop("resourceVersion", None)
            if wanted_rv and str(wanted_rv) != str(current["metadata"].get("resourceVersion")):
                raise kmock.KubernetesError(
                    status=409,
                    reason="Conflict",
                    message="the object has been modified; please apply your changes to the "
                    "latest version and try again",
                    details={},
                )
            if self._has_status_subresource(resource) and request.subresource == "status":
                new = {**current, "status": data.get("status")}
            else:
                kept = ("uid", "creationTimestamp", "namespace", "generation", "resourceVersion")
                meta.update({k: current["metadata"][k] for k in kept if k in current["metadata"]})
                new = {**data, "metadata": meta}
                if self._has_status_subresource(resource):
                    new.pop("status", None)
                    if "status" in current:
                        new["status"] = current["status"]
            stored.history.append(new)
            await self._buses[resource].put({"type": "MODIFIED", "object": stored.raw})
            return aiohttp.web.json_response(stored.raw)

    def _register_crd(self, crd: Mapping[str, Any]) -> None:
        spec = crd.get("spec", {})
        names = spec.get("names", {})
        for version in spec.get("versions", []):
            if not version.get("served", True):
                continue
            self.resources[f"{spec['group']}/{version['name']}/{names['plural']}"] = (
                kmock.ResourceInfo(
                    kind=names.get("kind"),
                    singular=names.get("singular") or names.get("kind", "").lower(),
                    namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                    verbs={"get", "list", "watch", "create", "update", "patch", "delete"},
                    shortnames=set(names.get("shortNames", [])),
                    subresources=set((version.get("subresources") or {}).keys()),
                )
            )

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

    async def _after_delete(self, request: rendering.Request) -> None:
        """Garbage-collect dependents of a deleted object (background propagation)."""
        key = (request.resource, request.namespace, request.name)
        if key not in self.objects or not self.objects[key].deleted:
            return  # still held by finalizers
        uid = self.objects[key].last.get("metadata", {}).get("uid")
        if uid:
            await self.collect_garbage(uid)

    async def collect_garbage(self, owner_uid: str) -> None:
        dependents = []
        async with self._lock:
            for (resource, namespace, name), obj in list(self.objects.items()):
                if obj.deleted:
                    continue
                refs = obj.get("metadata", {}).get("ownerReferences") or []
                if any(ref.get("uid") == owner_uid for ref in refs):
                    dependents.append((resource, namespace, name))
            for resource, namespace, name in dependents:
                obj = self.objects[resource, namespace, name]
                raw = obj.raw
                obj.delete()
                await self._buses[resource].put({"type": "DELETED", "object": raw})
        for resource, namespace, name in dependents:
            uid = self.objects[resource, namespace, name].last.get("metadata", {}).get("uid")
            if uid:
                await self.collect_garbage(uid)

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

    async def _serve_create(self, request: rendering.Request) -> rendering.Payload:
        raw: dict[str, Any] = self._object(request, from_body=True).raw
        return raw

    async def _serve_update(self, request: rendering.Request) -> rendering.Payload:
        raw: dict[str, Any] = self._object(request).last.raw
        return raw

    async def _serve_delete(self, request: rendering.Request) -> rendering.Payload:
        raw: dict[str, Any] = self._object(request).last.raw
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

    async def _serve_namespaces(self, raw: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        parts = raw.path.rstrip("/").split("/")
        name = parts[4] if len(parts) > 4 else None
        request = rendering.Request(
            method=raw.method,
            url=raw.url,
            params=dict(raw.query),
            headers=dict(raw.headers),
            resource=kmock.resource("", "v1", "namespaces"),
            name=name,
        )
        self._log(request, 200)

        def body(ns: str) -> dict[str, Any]:
            return {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": ns, "resourceVersion": "1", "uid": f"ns-{ns}"},
                "status": {"phase": "Active"},
            }

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

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)

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
