"""The client side of the Kubernetes substrate: what ``JobClient(substrate="kubernetes")`` calls.

:class:`KubernetesBackend` implements :class:`~kubemill.substrates.base.Backend` against a
cluster through the official ``kubernetes`` client (kubeconfig or in-cluster configuration,
authentication, TLS, proxies are the client's; it is imported only when a backend is built,
so ``import kubemill`` stays cheap):

- ``submit`` creates the job object (``kubemill.dev/v1``, plural from the CRD registry
  :data:`kubemill.api.crd.CRD_KINDS`); the operator does the rest;
- ``get``/``list`` map the object's status, and each replica from its pod (labelled
  ``kubemill.dev/job-name``, controlled by the job): phase, exit code, restarts, pod IP;
- ``wait`` watches the job until it is Succeeded or Failed (or a timeout);
- ``logs`` reads each replica's pod log; ``follow`` streams every replica at once, picks
  up pods that are (re)created and containers that restart, until the job has finished;
- ``events`` lists the ``core/v1`` Events whose ``involvedObject`` is the job;
- ``delete`` deletes the job object; its pods, services and PodGroup go with it through
  the garbage collector (they carry an ``ownerReference`` to the job).

Errors say what to do (see :mod:`.client_errors`): CRDs missing, no operator acting on a
new job within ``operator_timeout`` seconds, which verb on which resource RBAC refuses, an
unreachable cluster or an unusable kubeconfig. The API server's status, reason and message
are always kept in them.

Requests go through ``ApiClient.call_api`` with plain JSON bodies rather than the typed
``CoreV1Api``/``CustomObjectsApi`` methods: those validate arguments and bodies against the
client's own models (strictly, since ``kubernetes`` 35) and turn pods into model objects we
would only turn back into dicts.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from kubemill import __version__
from kubemill.api import API_VERSION, GROUP, VERSION, ConditionType, Job, load_document
from kubemill.api.crd import CRD_KINDS
from kubemill.frameworks import LABEL_JOB_NAME, replica_name
from kubemill.substrates.base import (
    EventRecord,
    JobExists,
    JobNotFound,
    JobView,
    LogLine,
    ReplicaView,
    SubmitOptions,
    SubstrateError,
)
from kubemill.substrates.kubernetes.client_errors import (
    INSTALL_HINT,
    CRDsNotInstalled,
    KubeApiError,
    KubeconfigError,
    OperatorNotActing,
    Request,
    api_error,
    parse_answer,
    unreachable,
)
from kubemill.substrates.kubernetes.install import DEFAULT_NAMESPACE as OPERATOR_NAMESPACE

DEFAULT_OPERATOR_TIMEOUT = 30.0
"""Seconds a new job may go without a condition or a pod before we say no operator acts."""
DEFAULT_POLL_INTERVAL = 1.0
"""Seconds between looks at pods while following logs."""
REQUEST_TIMEOUT = (5.0, 60.0)
"""(connect, read) seconds for one ordinary request."""
WATCH_SECONDS = 300.0
"""Longest single watch request; a new one starts after it (servers end them anyway)."""
FINISH_GRACE = 5.0
"""After the job has finished, seconds to let log streams of still-running pods end."""
USER_AGENT = f"kubemill/{__version__}"
CONNECTION_POOL_SIZE = 64
_PHASES = frozenset({"Pending", "Running", "Succeeded", "Failed", "Unknown"})
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


# --- configuration -------------------------------------------------------------------------


@dataclass(frozen=True)
class Connection:
    """A configured API client and where it points."""

    api_client: Any
    """A ``kubernetes.client.ApiClient``."""
    server: str
    context: str | None
    namespace: str
    """The context's namespace (``default`` when it names none)."""


_SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def connect(*, kubeconfig: str | os.PathLike[str] | None, context: str | None) -> Connection:
    """An API client from ``kubeconfig`` (else ``$KUBECONFIG``, ``~/.kube/config``, or the
    pod's service account when none of those exists and we run in a cluster)."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    configuration = client.Configuration()
    path = None if kubeconfig is None else str(Path(kubeconfig).expanduser())
    where = path or os.environ.get("KUBECONFIG") or "~/.kube/config"
    namespace = "default"
    if path is not None and not Path(path).is_file():
        raise KubeconfigError(
            f"no kubeconfig at {path}: pass --kubeconfig FILE (or set KUBECONFIG) for a "
            "cluster you can reach"
        )
    default_exists = any(
        Path(p).expanduser().is_file()
        for p in (os.environ.get("KUBECONFIG") or "~/.kube/config").split(os.pathsep)
        if p
    )
    if path is None and not default_exists and os.environ.get("KUBERNETES_SERVICE_HOST"):
        try:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except ConfigException as exc:
            raise KubeconfigError(
                f"no kubeconfig, and the in-cluster service account is unusable: {exc}"
            ) from exc
        with contextlib.suppress(OSError):
            namespace = _SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or namespace
        context = None
    else:
        if path is None and not default_exists:
            raise KubeconfigError(
                f"no kubeconfig found (looked at {where}): pass --kubeconfig FILE or set "
                "KUBECONFIG; `kubectl config current-context` shows what kubectl uses"
            )
        try:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=path,
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
            contexts, active = config.list_kube_config_contexts(config_file=path)  # type: ignore[no-untyped-call]
        except ConfigException as exc:
            hint = (
                "; `kubectl config get-contexts` lists the contexts"
                if context
                else "; check it with `kubectl config view`"
            )
            raise KubeconfigError(f"cannot use the kubeconfig {where}: {exc}{hint}") from exc
        chosen = next((c for c in contexts or () if c.get("name") == context), active)
        if chosen:
            context = str(chosen.get("name") or "") or context
            namespace = str((chosen.get("context") or {}).get("namespace") or namespace)
    # Following logs holds a connection per replica; urllib3 would open extra ones past the
    # pool's size anyway, but warn about each.
    configuration.connection_pool_maxsize = max(
        configuration.connection_pool_maxsize or 0, CONNECTION_POOL_SIZE
    )
    api_client = client.ApiClient(configuration)
    api_client.user_agent = USER_AGENT
    return Connection(api_client, str(configuration.host), context, namespace)


# --- requests ------------------------------------------------------------------------------


class _Http:
    """Raw JSON requests through the client's ``ApiClient``, errors translated."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.api_client = connection.api_client

    def send(
        self,
        request: Request,
        method: str,
        path: str,
        *,
        query: Iterable[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
        timeout: tuple[float, float | None] = REQUEST_TIMEOUT,
    ) -> Any:
        """The response (a urllib3 response, not yet read) of a 2xx answer."""
        from kubernetes.client.exceptions import ApiException

        headers = {"Content-Type": content_type, "Accept": "application/json"}
        try:
            method_, url, header_params, payload, _ = self.api_client.param_serialize(
                method,
                path,
                query_params=list(query),
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            response = self.api_client.call_api(
                method_, url, header_params=header_params, body=payload, _request_timeout=timeout
            )
        except ApiException as exc:
            if not exc.status:  # the client's own "status 0": TLS and such
                raise unreachable(
                    exc, server=self.connection.server, context=self.connection.context
                ) from exc
            raise api_error(request, parse_answer(exc.status, str(exc.reason), exc.body)) from exc
        except Exception as exc:
            if _is_connection_error(exc):
                raise unreachable(
                    exc, server=self.connection.server, context=self.connection.context
                ) from exc
            raise
        raw = response.response
        if not 200 <= response.status <= 299:
            try:
                data = raw.data
            finally:
                raw.release_conn()
            raise api_error(request, parse_answer(response.status, str(response.reason), data))
        return raw

    def json(self, request: Request, method: str, path: str, **kwargs: Any) -> Any:
        raw = self.send(request, method, path, **kwargs)
        try:
            data = raw.data
        except Exception as exc:
            if _is_connection_error(exc):
                raise unreachable(
                    exc, server=self.connection.server, context=self.connection.context
                ) from exc
            raise
        finally:
            raw.release_conn()
        return json.loads(data) if data else {}


def _is_connection_error(exc: BaseException) -> bool:
    """urllib3's errors (refused, reset, timeouts, DNS) and the OS errors under them."""
    return isinstance(exc, OSError) or type(exc).__module__.startswith("urllib3")


def _path(*, group: str, version: str, plural: str, namespace: str | None) -> str:
    prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
    if namespace is None:
        return f"{prefix}/{plural}"
    return f"{prefix}/namespaces/{quote(namespace, safe='')}/{plural}"


# --- job kinds -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Kind:
    kind: str
    plural: str
    names: frozenset[str]
    """What a user may write before ``/`` to name the kind (``tfjob/x``, ``tfj/x``, ...)."""

    def path(self, namespace: str | None, name: str | None = None) -> str:
        base = _path(group=GROUP, version=VERSION, plural=self.plural, namespace=namespace)
        return base if name is None else f"{base}/{quote(name, safe='')}"

    @property
    def resource(self) -> str:
        return f"{self.plural}.{GROUP}"


KINDS: tuple[_Kind, ...] = tuple(
    _Kind(
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
    for entry in CRD_KINDS.values()
)


def _kind_of(job: Job) -> _Kind:
    for kind in KINDS:
        if kind.kind == job.KIND:
            return kind
    raise SubstrateError(
        f"{job.KIND} has no CRD in kubemill.api.crd, so it cannot run on Kubernetes yet"
    )


def _split_name(name: str) -> tuple[tuple[_Kind, ...], str]:
    """``name`` or ``kind/name`` (kubectl style) -> the kinds to look in and the name."""
    if "/" not in name:
        return KINDS, name
    prefix, _, rest = name.partition("/")
    chosen = tuple(k for k in KINDS if prefix.lower() in k.names)
    if not chosen or not rest:
        known = ", ".join(f"{k.kind.lower()}/NAME" for k in KINDS)
        raise SubstrateError(f"cannot tell which job {name!r} means: write NAME or one of {known}")
    return chosen, rest


# --- reading objects -----------------------------------------------------------------------


def _time(value: Any) -> datetime | None:
    if not value or not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def load_job(raw: Mapping[str, Any]) -> Job:
    """The job model of an object read from the cluster (status included)."""
    job, errors = load_document(raw)
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


def _controller_uid(meta: Mapping[str, Any]) -> str | None:
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller"):
            return str(ref.get("uid") or "") or None
    return None


def _main_container(job: Job, pod: Mapping[str, Any]) -> str | None:
    """The framework's container (``tensorflow``, ``pytorch``), else the pod's first one."""
    names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or ()]
    if job.DEFAULT_CONTAINER in names:
        return job.DEFAULT_CONTAINER
    return str(names[0]) if names and names[0] else None


def _container_status(pod: Mapping[str, Any], container: str | None) -> Mapping[str, Any]:
    for status in (pod.get("status") or {}).get("containerStatuses") or ():
        if status.get("name") == container:
            return dict(status)
    return {}


def _port(job: Job, pod: Mapping[str, Any], container: str | None) -> int | None:
    for c in (pod.get("spec") or {}).get("containers") or ():
        if c.get("name") == container:
            for port in c.get("ports") or ():
                if port.get("name") == job.DEFAULT_PORT_NAME and port.get("containerPort"):
                    return int(port["containerPort"])
    return None


def replica_view(
    job: Job, replica_type: str, index: int, name: str, pod: Mapping[str, Any] | None
) -> ReplicaView:
    """One replica as ``get`` shows it: from its pod, or why there is none."""
    if pod is None:
        if job.status.finished:
            return ReplicaView(
                name,
                replica_type,
                index,
                phase="Unknown",
                reason="PodDeleted",
                message="the job has finished and its pod is gone (cleanPodPolicy or by hand)",
            )
        if job.status.is_true(ConditionType.SUSPENDED):
            return ReplicaView(
                name,
                replica_type,
                index,
                phase="Pending",
                reason="Suspended",
                message="the job is suspended",
            )
        return ReplicaView(
            name,
            replica_type,
            index,
            phase="Pending",
            reason="NoPod",
            message="the operator has not created its pod yet",
        )
    status = pod.get("status") or {}
    container = _main_container(job, pod)
    cstatus = _container_status(pod, container)
    state = cstatus.get("state") or {}
    terminated = state.get("terminated") or {}
    waiting = state.get("waiting") or {}
    running = state.get("running") or {}
    phase = str(status.get("phase") or "Pending")
    unscheduled: Mapping[str, Any] = next(
        (
            c
            for c in status.get("conditions") or ()
            if c.get("type") == "PodScheduled" and c.get("status") == "False"
        ),
        {},
    )
    reason = str(
        status.get("reason")
        or terminated.get("reason")
        or waiting.get("reason")
        or unscheduled.get("reason")
        or ""
    )
    message = str(
        status.get("message")
        or terminated.get("message")
        or waiting.get("message")
        or unscheduled.get("message")
        or ""
    )
    if (pod.get("metadata") or {}).get("deletionTimestamp") and not message:
        message = "the pod is being deleted"
    exit_code = terminated.get("exitCode")
    ip = str(status.get("podIP") or "")
    port = _port(job, pod, container)
    return ReplicaView(
        name=name,
        replica_type=replica_type,
        index=index,
        phase=phase if phase in _PHASES else "Unknown",
        exit_code=int(exit_code) if exit_code is not None else None,
        restarts=int(cstatus.get("restartCount") or 0),
        started=_time(running.get("startedAt") or terminated.get("startedAt"))
        or _time(status.get("startTime")),
        finished=_time(terminated.get("finishedAt")),
        reason=reason,
        message=message,
        address=f"{ip}:{port}" if ip and port else ip,
    )


def _replica_slots(job: Job) -> list[tuple[str, int, str]]:
    """(type, index, pod name) of every replica the spec asks for, in start order."""
    types = [t for t in job.REPLICA_TYPES if t in job.replica_specs]
    types += [t for t in job.replica_specs if t not in types]
    return [
        (rtype, index, replica_name(job.name, rtype, index))
        for rtype in types
        for index in range(job.replica_count(rtype))
    ]


def _canonical_type(job: Job, label: str) -> str:
    for rtype in (*job.replica_specs, *job.REPLICA_TYPES):
        if rtype.lower() == label.lower():
            return rtype
    return label


def replica_views(job: Job, pods: Iterable[Mapping[str, Any]]) -> tuple[ReplicaView, ...]:
    """Every replica of the spec, then pods the spec no longer asks for (scaled down)."""
    by_name = {str((p.get("metadata") or {}).get("name")): p for p in pods}
    views = [
        replica_view(job, rtype, index, name, by_name.pop(name, None))
        for rtype, index, name in _replica_slots(job)
    ]
    for name, pod in sorted(by_name.items()):
        labels = (pod.get("metadata") or {}).get("labels") or {}
        raw_index = str(labels.get("kubemill.dev/replica-index", ""))
        views.append(
            replica_view(
                job,
                _canonical_type(job, str(labels.get("kubemill.dev/replica-type", ""))),
                int(raw_index) if raw_index.isdigit() else -1,
                name,
                pod,
            )
        )
    return tuple(views)


def _short(job_name: str, replica: str) -> str:
    return replica[len(job_name) + 1 :] if replica.startswith(job_name + "-") else replica


def _pick_replica(job_name: str, names: list[str], wanted: str) -> str:
    key = wanted.lower()
    for name in names:
        if key in (name.lower(), _short(job_name, name).lower()):
            return name
    known = ", ".join(_short(job_name, n) for n in names)
    raise SubstrateError(f"job {job_name} has no replica {wanted!r} (its replicas: {known})")


# --- the backend ---------------------------------------------------------------------------


@dataclass
class _Found:
    kind: _Kind
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


class KubernetesBackend:
    """Jobs on a Kubernetes cluster that runs the kubemill operator.

    ``kubeconfig``/``context`` choose the cluster as kubectl does (defaults: ``$KUBECONFIG``
    or ``~/.kube/config`` and its current context; in a pod without either, its service
    account). ``namespace`` is the default namespace (else the context's, else
    ``default``). ``operator_timeout`` is how long a new job may go without any sign of
    the operator (a condition or a pod) before ``submit(detach=False)``, ``wait`` and
    ``logs(follow=True)`` raise :class:`OperatorNotActing` (``0`` or ``None``: never).
    ``api_client`` uses a ready ``kubernetes.client.ApiClient`` instead of a kubeconfig.
    """

    def __init__(
        self,
        *,
        kubeconfig: str | os.PathLike[str] | None = None,
        context: str | None = None,
        namespace: str | None = None,
        operator_timeout: float | None = DEFAULT_OPERATOR_TIMEOUT,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        api_client: Any = None,
    ) -> None:
        if api_client is not None:
            connection = Connection(
                api_client, str(api_client.configuration.host), context, namespace or "default"
            )
        else:
            connection = connect(kubeconfig=kubeconfig, context=context)
        self.connection = connection
        self.http = _Http(connection)
        self.default_namespace = namespace or connection.namespace
        self.operator_timeout = operator_timeout or 0.0
        self.poll_interval = poll_interval
        self._submitted: dict[str, float] = {}
        """uid -> monotonic time of our submit: the operator check counts from there."""

    def close(self) -> None:
        """Release the connection pool."""
        self.connection.api_client.close()

    def _ns(self, namespace: str | None) -> str:
        return namespace or self.default_namespace

    # --- submit --------------------------------------------------------------------------

    def submit(self, job: Job, options: SubmitOptions) -> JobView:
        """Create the job object; returns at once with it as created (no replicas yet).

        ``detach=False`` (a foreground run) also waits until the operator has acted on it
        (a condition or a pod) and raises :class:`OperatorNotActing` after
        ``operator_timeout`` seconds without; the job stays in the cluster then.
        """
        kind = _kind_of(job)
        namespace = self._target_namespace(job, options.namespace)
        body = job_body(job, namespace)
        request = Request("create", kind.plural, GROUP, namespace, job.name)
        try:
            raw = self.http.json(request, "POST", kind.path(namespace), body=body)
        except KubeApiError as exc:
            if exc.status == 409:
                raise JobExists(
                    f"a {job.KIND} named {job.name!r} already exists in namespace "
                    f"{namespace!r}; delete it first (`kubemill delete {job.name} -n "
                    f"{namespace}`) or "
                    f"choose another metadata.name (API: {exc.status} {exc.reason})"
                ) from exc
            if exc.status == 404:
                self._require_crds([kind])
            raise
        found = _Found(kind, raw)
        self._submitted[found.uid] = time.monotonic()
        if not options.detach and self.operator_timeout:
            found = self._until(found, done=_acted, deadline=None, pods_suffice=True)
        return self._view(found, self._pods(found) if not options.detach else [])

    def _target_namespace(self, job: Job, namespace: str | None) -> str:
        given = job.metadata.namespace
        if namespace is not None and given and given != namespace:
            raise SubstrateError(
                f"the manifest says namespace {given!r} but {namespace!r} was asked for;"
                " remove metadata.namespace or ask for the same one"
            )
        return namespace or given or self.default_namespace

    # --- reads ---------------------------------------------------------------------------

    def get(self, name: str, namespace: str | None = None) -> JobView:
        """The job now, with a replica per pod the spec asks for. Raises ``JobNotFound``."""
        found = self._find(name, self._ns(namespace))
        return self._view(found, self._pods(found))

    def list(self, namespace: str | None = None) -> builtins.list[JobView]:
        """Every job of ``namespace`` (every namespace when ``None``), oldest first."""
        objects: builtins.list[_Found] = []
        missing: builtins.list[_Kind] = []
        for kind in KINDS:
            request = Request("list", kind.plural, GROUP, namespace)
            try:
                answer = self.http.json(request, "GET", kind.path(namespace))
            except KubeApiError as exc:
                if exc.status != 404:
                    raise
                missing.append(kind)
                continue
            for item in answer.get("items") or ():
                # Lists do not repeat kind/apiVersion on items (the list has them).
                item.setdefault("apiVersion", API_VERSION)
                item.setdefault("kind", kind.kind)
                objects.append(_Found(kind, item))
        if len(missing) == len(KINDS):
            self._require_crds(missing)  # none served: say so (a partial install lists the rest)
        pods_by_owner: dict[str, builtins.list[dict[str, Any]]] = {}
        if objects:
            for pod in self._list_pods(namespace, LABEL_JOB_NAME):
                owner = _controller_uid(pod.get("metadata") or {})
                if owner:
                    pods_by_owner.setdefault(owner, []).append(pod)
        views = [self._view(f, pods_by_owner.get(f.uid, [])) for f in objects]
        return sorted(
            views,
            key=lambda v: (v.created or datetime.min.replace(tzinfo=UTC), v.namespace, v.name),
        )

    def wait(
        self, name: str, namespace: str | None = None, timeout: float | None = None
    ) -> JobView:
        """Watch the job until it has Succeeded or Failed, or ``timeout`` seconds passed.

        Returns the job as it is then (check ``view.finished`` after a timeout). Raises
        :class:`OperatorNotActing` if it has had neither a condition nor a pod for
        ``operator_timeout`` seconds, and ``JobNotFound`` if it is deleted meanwhile.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        found = self._find(name, self._ns(namespace))
        found = self._until(found, done=_finished, deadline=deadline)
        return self._view(found, self._pods(found))

    def events(self, name: str, namespace: str | None = None) -> builtins.list[EventRecord]:
        """The Events whose ``involvedObject`` is the job, oldest first."""
        found = self._find(name, self._ns(namespace))
        selector = ",".join(
            [
                f"involvedObject.kind={found.kind.kind}",
                f"involvedObject.name={found.name}",
                *([f"involvedObject.uid={found.uid}"] if found.uid else []),
            ]
        )
        request = Request("list", "events", "", found.namespace)
        path = _path(group="", version="v1", plural="events", namespace=found.namespace)
        answer = self.http.json(request, "GET", path, query=[("fieldSelector", selector)])
        records = [_event(item) for item in answer.get("items") or ()]
        return sorted(records, key=lambda e: e.time)

    # --- logs ----------------------------------------------------------------------------

    def logs(
        self,
        name: str,
        namespace: str | None = None,
        *,
        replica: str | None = None,
        follow: bool = False,
    ) -> Iterator[LogLine]:
        """Each replica's pod log (its framework container), replica after replica.

        ``replica`` picks one (``worker-1`` or the pod's name). ``follow`` streams every
        replica at once as lines are written, following pods the operator recreates and
        containers that restart, until the job has finished and its pods are done.
        Replicas whose pods do not exist (yet, or any more) have no lines.
        """
        found = self._find(name, self._ns(namespace))
        job = found.job()
        wanted = None
        if replica is not None:
            names = [slot[2] for slot in _replica_slots(job)]
            extra = sorted(
                str(p["metadata"]["name"])
                for p in self._pods(found)
                if p["metadata"]["name"] not in names
            )
            wanted = _pick_replica(job.name, names + extra, replica)
        if follow:
            return _LogFollower(self, found, wanted).lines()
        return self._read_logs(found, job, wanted)

    def _read_logs(self, found: _Found, job: Job, wanted: str | None) -> Iterator[LogLine]:
        pods = {str(p["metadata"]["name"]): p for p in self._pods(found)}
        order = [slot[2] for slot in _replica_slots(job)]
        order += sorted(n for n in pods if n not in order)
        for pod_name in order:
            pod = pods.get(pod_name)
            if pod is None or (wanted is not None and pod_name != wanted):
                continue
            container = _main_container(job, pod)
            if not _has_started(_container_status(pod, container)):
                continue
            raw = self._open_log(found.namespace, pod_name, container, follow=False)
            if raw is None:
                continue
            try:
                text = raw.data.decode("utf-8", errors="replace")
            finally:
                raw.release_conn()
            for line in text.splitlines():
                moment, rest = _split_timestamp(line)
                yield LogLine(replica=pod_name, text=rest, time=moment)

    def _open_log(
        self,
        namespace: str,
        pod: str,
        container: str | None,
        *,
        follow: bool,
        since: datetime | None = None,
    ) -> Any:
        """The log response of one pod's container, or ``None`` if there is none (yet)."""
        query = [("timestamps", "true")]
        if container:
            query.append(("container", container))
        if follow:
            query.append(("follow", "true"))
        if since is not None:
            query.append(("sinceTime", since.strftime("%Y-%m-%dT%H:%M:%SZ")))
        request = Request("get", "pods", "", namespace, pod, subresource="log")
        path = _path(group="", version="v1", plural="pods", namespace=namespace)
        try:
            return self.http.send(
                request,
                "GET",
                f"{path}/{quote(pod, safe='')}/log",
                query=query,
                # A followed log may be quiet for hours: no read timeout, closed by us.
                timeout=(REQUEST_TIMEOUT[0], None) if follow else REQUEST_TIMEOUT,
            )
        except KubeApiError as exc:
            # 404: the pod is gone. 400: its container is not running yet ("waiting to
            # start") or was never started: there is nothing to read, which is no error.
            if exc.status in (400, 404):
                return None
            raise

    # --- delete --------------------------------------------------------------------------

    def delete(self, name: str, namespace: str | None = None) -> None:
        """Delete the job object; returns once the API server has accepted it.

        Its pods, services and PodGroup are deleted by the cluster's garbage collector
        (each carries an ``ownerReference`` to the job); pods get their grace period.
        Only the object we found is deleted (a ``uid`` precondition), never a namesake
        created meanwhile.
        """
        found = self._find(name, self._ns(namespace))
        options: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": "Background",
        }
        if found.uid:
            options["preconditions"] = {"uid": found.uid}
        request = Request("delete", found.kind.plural, GROUP, found.namespace, found.name)
        try:
            self.http.json(
                request, "DELETE", found.kind.path(found.namespace, found.name), body=options
            )
        except KubeApiError as exc:
            if exc.status in (404, 409):  # gone already (409: the precondition's namesake)
                raise JobNotFound(
                    f"{found.kind.kind} {found.namespace}/{found.name} was deleted meanwhile"
                ) from exc
            raise

    # --- finding jobs and their pods -----------------------------------------------------

    def _find(self, name: str, namespace: str) -> _Found:
        kinds, bare = _split_name(name)
        found: builtins.list[_Found] = []
        missing: builtins.list[_Kind] = []
        for kind in kinds:
            request = Request("get", kind.plural, GROUP, namespace, bare)
            try:
                raw = self.http.json(request, "GET", kind.path(namespace, bare))
            except KubeApiError as exc:
                if exc.status != 404:
                    raise
                missing.append(kind)
                continue
            found.append(_Found(kind, raw))
        if len(found) > 1:
            choices = " or ".join(f"{f.kind.kind.lower()}/{bare}" for f in found)
            raise SubstrateError(
                f"{' and '.join(f.kind.kind for f in found)} are both named {bare!r} in "
                f"namespace {namespace!r}; say which: {choices}"
            )
        if not found:
            unserved = self._unserved(missing)
            if len(unserved) == len(kinds):
                raise CRDsNotInstalled([k.resource for k in unserved], self.connection.server)
            note = ""
            if unserved:
                note = f" ({', '.join(k.resource for k in unserved)} is not installed)"
            kinds_text = " or ".join(k.kind for k in kinds)
            raise JobNotFound(
                f"no job {bare!r} in namespace {namespace!r} (no {kinds_text} of that name)"
                f"{note}; `kubemill list -n {namespace}` shows the jobs there"
            )
        return found[0]

    def _unserved(self, kinds: Iterable[_Kind]) -> builtins.list[_Kind]:
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

    def _require_crds(self, kinds: Iterable[_Kind]) -> None:
        """Raise :class:`CRDsNotInstalled` if discovery does not list these kinds."""
        missing = self._unserved(kinds)
        if missing:
            raise CRDsNotInstalled([k.resource for k in missing], self.connection.server)

    def _list_pods(self, namespace: str | None, selector: str) -> builtins.list[dict[str, Any]]:
        request = Request("list", "pods", "", namespace)
        path = _path(group="", version="v1", plural="pods", namespace=namespace)
        answer = self.http.json(request, "GET", path, query=[("labelSelector", selector)])
        return [dict(p) for p in answer.get("items") or ()]

    def _pods(self, found: _Found) -> builtins.list[dict[str, Any]]:
        """The pods the job controls (a namesake's leftovers do not count)."""
        pods = self._list_pods(found.namespace, f"{LABEL_JOB_NAME}={found.name}")
        return [p for p in pods if _controller_uid(p.get("metadata") or {}) == found.uid]

    def _view(self, found: _Found, pods: Iterable[Mapping[str, Any]]) -> JobView:
        job = found.job()
        return JobView(
            job=job,
            status=job.status,
            replicas=replica_views(job, pods),
            created=_time(job.metadata.creation_timestamp),
        )

    # --- watching a job ------------------------------------------------------------------

    def _until(
        self,
        found: _Found,
        *,
        done: Callable[[Job], bool],
        deadline: float | None,
        pods_suffice: bool = False,
    ) -> _Found:
        """Watch ``found`` until ``done(job)`` or ``deadline``; check the operator acts.

        The check comes ``operator_timeout`` seconds after our own submit of the job (or
        after we started watching it): no condition by then, and no pod, means no operator
        has picked it up. ``pods_suffice``: pods found then also end the watch.
        """
        check_at = None
        if self.operator_timeout:
            since = self._submitted.get(found.uid, time.monotonic())
            check_at = since + self.operator_timeout
        while True:
            job = found.job()
            if done(job):
                return found
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return found
            if check_at is not None and now >= check_at:
                if not job.status.conditions and not self._pods(found):
                    raise self._not_acting(found)
                check_at = None
                if pods_suffice:
                    return found  # pods exist: the operator is at work
            ends = [t for t in (deadline, check_at) if t is not None]
            seconds = min([WATCH_SECONDS, *(t - now for t in ends)])
            changed = self._watch_once(found, max(seconds, 0.05))
            found = changed if changed is not None else self._refetch(found)

    def _refetch(self, found: _Found) -> _Found:
        request = Request("get", found.kind.plural, GROUP, found.namespace, found.name)
        try:
            raw = self.http.json(request, "GET", found.kind.path(found.namespace, found.name))
        except KubeApiError as exc:
            if exc.status == 404:
                raise self._deleted(found) from exc
            raise
        if found.uid and raw.get("metadata", {}).get("uid") != found.uid:
            raise self._deleted(found)
        return _Found(found.kind, raw)

    def _deleted(self, found: _Found) -> JobNotFound:
        return JobNotFound(
            f"{found.kind.kind} {found.namespace}/{found.name} was deleted while we waited"
        )

    def _watch_once(self, found: _Found, seconds: float) -> _Found | None:
        """The job after its next change, or ``None`` when nothing came in ``seconds``."""
        query = [
            ("watch", "true"),
            ("fieldSelector", f"metadata.name={found.name}"),
            ("timeoutSeconds", str(max(1, int(seconds)))),
            ("allowWatchBookmarks", "false"),
        ]
        version = (found.raw.get("metadata") or {}).get("resourceVersion")
        if version:
            query.append(("resourceVersion", str(version)))
        request = Request("watch", found.kind.plural, GROUP, found.namespace)
        try:
            # The read timeout ends a quiet watch on servers that ignore timeoutSeconds.
            raw = self.http.send(
                request,
                "GET",
                found.kind.path(found.namespace),
                query=query,
                timeout=(REQUEST_TIMEOUT[0], seconds),
            )
        except KubeApiError as exc:
            if exc.status == 410:
                return None  # our resourceVersion is too old: the caller reads afresh
            raise
        try:
            for line in _lines(raw):
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    return None  # e.g. 410 Gone: start over from a fresh read
                meta = obj.get("metadata") or {}
                if meta.get("name") != found.name:
                    continue
                if kind == "DELETED" or (found.uid and meta.get("uid") != found.uid):
                    raise self._deleted(found)
                obj.setdefault("apiVersion", API_VERSION)
                obj.setdefault("kind", found.kind.kind)
                if obj == found.raw:
                    continue  # the current state again (a watch from "now")
                return _Found(found.kind, obj)
        except Exception as exc:
            if _is_connection_error(exc):
                return None  # timed out or cut: the caller reads afresh
            raise
        finally:
            with contextlib.suppress(Exception):
                raw.release_conn()
        return None

    def _not_acting(self, found: _Found) -> OperatorNotActing:
        return OperatorNotActing(
            f"{found.kind.kind} {found.namespace}/{found.name} has not been picked up: "
            f"{self.operator_timeout:g} s after it was submitted it has no condition and no "
            "pods. Is the kubemill operator running? see `kubectl -n "
            f"{OPERATOR_NAMESPACE} get pods` (not installed: {INSTALL_HINT}; watching "
            "another namespace: check its --namespace flags). The job stays in the cluster "
            f"until `kubemill delete {found.name} -n {found.namespace}`"
        )

    # --- interrupt (Ctrl-C of a foreground run) -------------------------------------------

    def interrupt(self, name: str, namespace: str | None = None, *, force: bool = False) -> JobView:
        """Stop the job's replicas and keep the job: suspend it (``runPolicy.suspend``).

        On a cluster the job is not failed by the client (its status is the operator's);
        it is suspended, the operator deletes its pods, and it can be resumed by setting
        ``spec.runPolicy.suspend`` back to false. Waits until its pods are gone (at most
        ``operator_timeout`` seconds; ``force`` deletes them at once without a grace
        period). A job that already finished is left as it is.
        """
        found = self._find(name, self._ns(namespace))
        if found.job().status.finished:
            return self._view(found, self._pods(found))
        request = Request("patch", found.kind.plural, GROUP, found.namespace, found.name)
        raw = self.http.json(
            request,
            "PATCH",
            found.kind.path(found.namespace, found.name),
            body={"spec": {"runPolicy": {"suspend": True}}},
            content_type="application/merge-patch+json",
        )
        found = _Found(found.kind, raw)
        deadline = time.monotonic() + max(self.operator_timeout, 1.0)
        while True:
            pods = self._pods(found)
            if not pods or time.monotonic() >= deadline:
                return self._view(self._refetch(found), pods)
            if force:
                for pod in pods:
                    self._delete_pod(found.namespace, str(pod["metadata"]["name"]))
            time.sleep(min(self.poll_interval, 0.5))

    def _delete_pod(self, namespace: str, pod: str) -> None:
        request = Request("delete", "pods", "", namespace, pod)
        path = _path(group="", version="v1", plural="pods", namespace=namespace)
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
        try:
            self.http.json(request, "DELETE", f"{path}/{quote(pod, safe='')}", body=body)
        except KubeApiError as exc:
            if exc.status != 404:
                raise


def _finished(job: Job) -> bool:
    return job.status.finished


def _acted(job: Job) -> bool:
    return bool(job.status.conditions)


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


def _event(item: Mapping[str, Any]) -> EventRecord:
    meta = item.get("metadata") or {}
    moment = (
        _time(item.get("lastTimestamp"))
        or _time(item.get("eventTime"))
        or _time(item.get("firstTimestamp"))
        or _time(meta.get("creationTimestamp"))
        or datetime.fromtimestamp(0, UTC)
    )
    series = item.get("series") or {}
    count = item.get("count") or series.get("count") or 1
    return EventRecord(
        time=moment,
        type="Warning" if item.get("type") == "Warning" else "Normal",
        reason=str(item.get("reason") or ""),
        message=str(item.get("message") or ""),
        count=int(count),
    )


# --- log lines -----------------------------------------------------------------------------


def _lines(raw: Any) -> Iterator[str]:
    """Complete lines of a streamed response (a last line without newline included)."""
    partial = b""
    for chunk in raw.stream(4096, decode_content=True):
        partial += chunk
        *complete, partial = partial.split(b"\n")
        for line in complete:
            yield line.decode("utf-8", errors="replace").rstrip("\r")
    if partial:
        yield partial.decode("utf-8", errors="replace").rstrip("\r")


def _split_timestamp(line: str) -> tuple[datetime | None, str]:
    """``2024-01-02T03:04:05.123456789Z text`` (``timestamps=true``) -> (time, text)."""
    stamp, sep, rest = line.partition(" ")
    if sep and stamp[:1].isdigit() and "T" in stamp:
        moment = _time(stamp)
        if moment is not None:
            return moment, rest
    return None, line


def _has_started(cstatus: Mapping[str, Any]) -> bool:
    """Whether the container has (or had) a process whose log there is to read."""
    state = cstatus.get("state") or {}
    return "running" in state or "terminated" in state or bool(cstatus.get("lastState"))


@dataclass
class _Stream:
    """One followed log: a pod's container instance, read by its own thread."""

    pod: str
    key: tuple[str, int]
    """(pod uid, restart count): a new instance of the container is a new stream."""
    since: datetime | None = None
    last: datetime | None = None
    response: Any = None
    opened: bool = False
    """Whether the API served the log (a container not started yet is tried again)."""
    thread: threading.Thread | None = None
    closed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def close(self) -> None:
        with self.lock:
            self.closed = True
            response = self.response
        if response is not None:
            with contextlib.suppress(Exception):
                response.shutdown()  # unblocks a read in progress (urllib3 >= 2.3)
            with contextlib.suppress(Exception):
                response.release_conn()


@dataclass(frozen=True)
class _Ended:
    stream: _Stream
    error: BaseException | None = None


class _LogFollower:
    """Follows every replica's log at once until the job has finished.

    A thread per container instance reads its log and puts lines on a queue; the
    generator takes lines off it and, every ``poll_interval``, looks at the job and its
    pods to start streams for new pods and restarted containers. A stream cut while its
    container still runs is resumed from the last line's timestamp (lines at or before
    it are skipped). Once the job has finished, streams get :data:`FINISH_GRACE` seconds
    to end (pods the operator leaves running would otherwise be followed for ever).
    """

    def __init__(self, backend: KubernetesBackend, found: _Found, wanted: str | None) -> None:
        self.backend = backend
        self.found = found
        self.wanted = wanted
        self.queue: queue.Queue[LogLine | _Ended] = queue.Queue()
        self.active: dict[tuple[str, int], _Stream] = {}
        self.ended: dict[tuple[str, int], _Stream] = {}

    def lines(self) -> Iterator[LogLine]:
        backend = self.backend
        check_at = None
        if backend.operator_timeout:
            since = backend._submitted.get(self.found.uid, time.monotonic())
            check_at = since + backend.operator_timeout
        finished_at: float | None = None
        try:
            while True:
                if finished_at is None:
                    try:
                        self.found = backend._refetch(self.found)
                    except JobNotFound:
                        finished_at = time.monotonic()  # deleted: its pods go too
                    else:
                        if self.found.job().status.finished:
                            finished_at = time.monotonic()
                job = self.found.job()
                pods = backend._pods(self.found)
                if check_at is not None and time.monotonic() >= check_at:
                    if not job.status.conditions and not pods:
                        raise backend._not_acting(self.found)
                    check_at = None
                self._start_streams(job, pods)
                yield from self._drain(backend.poll_interval)
                if finished_at is not None:
                    if not self.active and self.queue.empty():
                        return
                    if time.monotonic() - finished_at >= FINISH_GRACE:
                        for stream in list(self.active.values()):
                            stream.close()
                        yield from self._drain(0.5)
                        return
        finally:
            for stream in [*self.active.values()]:
                stream.close()
            for stream in [*self.active.values(), *self.ended.values()]:
                if stream.thread is not None:
                    stream.thread.join(timeout=5)

    def _start_streams(self, job: Job, pods: Iterable[Mapping[str, Any]]) -> None:
        for pod in pods:
            meta = pod.get("metadata") or {}
            name = str(meta.get("name"))
            if self.wanted is not None and name != self.wanted:
                continue
            container = _main_container(job, pod)
            cstatus = _container_status(pod, container)
            if not _has_started(cstatus):
                continue
            key = (str(meta.get("uid") or name), int(cstatus.get("restartCount") or 0))
            if key in self.active:
                continue
            previous = self.ended.get(key)
            if previous is not None:
                if "running" not in (cstatus.get("state") or {}):
                    continue  # read to its end already
                # Cut while the container still runs: resume after the last line read.
                del self.ended[key]
            stream = _Stream(
                pod=name,
                key=key,
                since=previous.last if previous else None,
                last=previous.last if previous else None,
            )
            stream.thread = threading.Thread(
                target=self._read,
                args=(stream, container),
                name=f"kubemill-log-{name}",
                daemon=True,
            )
            self.active[key] = stream
            stream.thread.start()

    def _read(self, stream: _Stream, container: str | None) -> None:
        error: BaseException | None = None
        try:
            response = self.backend._open_log(
                self.found.namespace, stream.pod, container, follow=True, since=stream.since
            )
            if response is None:
                return
            with stream.lock:
                stream.response = response
                stream.opened = True
                closed = stream.closed
            if closed:
                return
            for line in _lines(response):
                moment, text = _split_timestamp(line)
                if stream.since is not None and moment is not None and moment <= stream.since:
                    continue  # read before the stream was cut
                if moment is not None:
                    stream.last = moment
                self.queue.put(LogLine(replica=stream.pod, text=text, time=moment))
        except Exception as exc:
            if not stream.closed and not _is_connection_error(exc):
                error = exc
        finally:
            self.queue.put(_Ended(stream, error))

    def _drain(self, seconds: float) -> Iterator[LogLine]:
        """Lines that arrive within ``seconds`` (returns early once all is quiet)."""
        until = time.monotonic() + seconds
        while True:
            remaining = until - time.monotonic()
            try:
                item = (
                    self.queue.get(timeout=max(remaining, 0.0))
                    if remaining > 0
                    else (self.queue.get_nowait())
                )
            except queue.Empty:
                return
            if isinstance(item, _Ended):
                self.active.pop(item.stream.key, None)
                if item.stream.opened:
                    self.ended[item.stream.key] = item.stream
                if item.error is not None:
                    raise item.error
                continue
            yield item


__all__ = [
    "DEFAULT_OPERATOR_TIMEOUT",
    "KINDS",
    "Connection",
    "KubernetesBackend",
    "connect",
    "job_body",
    "load_job",
    "replica_view",
    "replica_views",
]
