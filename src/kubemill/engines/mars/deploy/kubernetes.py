"""Mars's ``new_cluster`` on Kubernetes, with no operator: the seed's API, as written, which
:mod:`kubemill.deploy.kubernetes` serves at the path the seed imports (giving it the
substrate's reading of pods, :class:`PodState`, which this layer cannot import).

::

    from kubernetes import config
    from kubemill.deploy.kubernetes import new_cluster

    cluster = new_cluster(config.new_client_from_config(), worker_cpu=1, worker_mem="2g")
    ...
    cluster.stop()

:func:`new_cluster` validates its arguments through the cluster's model
(:func:`~kubemill.engines.mars.deploy.cluster.cluster_spec`: a bad size is refused before
anything is created, naming the argument), creates a namespace of the cluster's own
(refusing one that exists), then the objects the pure builders of
:mod:`kubemill.engines.mars.framework` describe -- the same the operator creates for the
kind -- and waits, showing progress with rich, until every supervisor and at least
``min_worker_num`` workers are ready. On a timeout or a failing pod it raises
:class:`~kubemill.engines.mars.deploy.cluster.ClusterError` with the failing pods' last log
lines and deletes the namespace (``keep_on_failure=True`` keeps it to look at).

:class:`KubernetesClusterClient` is the handle: ``namespace``, ``endpoint``
(``http://<host IP of a node running a supervisor>:<node port>``), ``session`` and
``stop()``, which deletes the namespace. ``KubernetesClusterClient(api_client, namespace,
endpoint)`` reattaches from another process.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from kubemill.engines.mars.api import MarsClusterSpec
from kubemill.engines.mars.deploy.cluster import ClusterClient, ClusterError, cluster_spec
from kubemill.engines.mars.framework import (
    LABEL_MARS_CLUSTER,
    LABEL_MARS_ROLE,
    ROLES,
    build_cluster,
    build_namespace,
    object_names,
    ready_needed,
)


class ContainerState(Protocol):
    """What is read of a pod's container: its name, its state's reason, its restarts."""

    @property
    def name(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def restart_count(self) -> int: ...
    @property
    def exit_code(self) -> int | None: ...


class PodState(Protocol):
    """What is read of a pod (the Kubernetes substrate's ``PodSnapshot`` is one)."""

    @property
    def name(self) -> str: ...
    @property
    def phase(self) -> str: ...
    @property
    def ready(self) -> bool: ...
    @property
    def reason(self) -> str: ...
    @property
    def containers(self) -> Sequence[ContainerState]: ...


PodReader = Callable[[Mapping[str, Any]], PodState]
"""Reads a pod's JSON body (``PodSnapshot.of``)."""

CLUSTER_NAME = "mars"
"""The name of the cluster's objects inside its own namespace (``mars-supervisor``, ...)."""
LOG_LINES = 20
"""How many of a failing pod's last log lines an error shows."""
FAILING_REASONS = frozenset(
    {
        "CrashLoopBackOff",
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "OOMKilled",
        "Error",
        "Evicted",
    }
)
"""Pod or container reasons that mean the pod will not come up by waiting."""


class _Kube:
    """The few API calls a cluster needs, answering plain JSON (the ``kubernetes`` client's
    typed models are not needed: the bodies come from the pure builders)."""

    def __init__(self, api_client: Any) -> None:
        from kubernetes import client

        self.api_client = api_client
        self.core = client.CoreV1Api(api_client)
        self.rbac = client.RbacAuthorizationV1Api(api_client)
        self.apps = client.AppsV1Api(api_client)
        self.ApiException: type[Exception] = client.exceptions.ApiException

    @staticmethod
    def _json(response: Any) -> Any:
        return json.loads(response.data or b"null")

    def status_of(self, exc: Exception) -> int:
        return int(getattr(exc, "status", 0) or 0)

    def namespace(self, name: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self._json(
                self.core.read_namespace(name, _preload_content=False)
            )
        except self.ApiException as exc:
            if self.status_of(exc) == 404:
                return None
            raise
        return found

    def create(self, body: Mapping[str, Any]) -> None:
        kind, namespace = body["kind"], body["metadata"].get("namespace")
        creators: dict[str, Callable[..., Any]] = {
            "Role": self.rbac.create_namespaced_role,
            "RoleBinding": self.rbac.create_namespaced_role_binding,
            "Deployment": self.apps.create_namespaced_deployment,
            "Service": self.core.create_namespaced_service,
        }
        if kind == "Namespace":
            namespace_body: Any = dict(body)  # the client takes plain dicts as bodies
            self.core.create_namespace(namespace_body, _preload_content=False)
        else:
            creators[kind](namespace, dict(body), _preload_content=False)

    def pods(self, namespace: str) -> list[dict[str, Any]]:
        selector = f"{LABEL_MARS_CLUSTER}={CLUSTER_NAME}"
        listed = self._json(
            self.core.list_namespaced_pod(
                namespace, label_selector=selector, _preload_content=False
            )
        )
        return list(listed.get("items") or [])

    def service(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self._json(
                self.core.read_namespaced_service(name, namespace, _preload_content=False)
            )
        except self.ApiException as exc:
            if self.status_of(exc) == 404:
                return None
            raise
        return found

    def log_tail(self, namespace: str, pod: str, lines: int) -> str:
        try:
            response: Any = self.core.read_namespaced_pod_log(
                pod, namespace, tail_lines=lines, _preload_content=False
            )
        except self.ApiException as exc:
            return f"(no log: {self.status_of(exc)} {getattr(exc, 'reason', '')})".rstrip()
        text: str = response.data.decode(errors="replace")
        return text

    def delete_namespace(self, name: str) -> bool:
        """Delete the namespace; False if it was not there."""
        try:
            self.core.delete_namespace(name, _preload_content=False)
        except self.ApiException as exc:
            if self.status_of(exc) == 404:
                return False
            raise
        return True


@dataclass
class _Readiness:
    """What the pods of a cluster show: ready counts, the supervisors' hosts, failures."""

    ready: dict[str, int] = field(default_factory=dict)
    supervisor_hosts: list[str] = field(default_factory=list)
    failing: list[tuple[str, str]] = field(default_factory=list)
    """(pod name, why)."""
    not_ready: list[str] = field(default_factory=list)


def _readiness(pods: list[dict[str, Any]], read_pod: PodReader) -> _Readiness:
    seen = _Readiness(ready=dict.fromkeys(ROLES, 0))
    by_role = {role: rtype for rtype, role in ROLES.items()}
    for body in sorted(pods, key=lambda p: str(p.get("metadata", {}).get("name"))):
        meta = body.get("metadata") or {}
        rtype = by_role.get((meta.get("labels") or {}).get(LABEL_MARS_ROLE, ""))
        if rtype is None or meta.get("deletionTimestamp"):
            continue
        snapshot = read_pod(body)
        why = _failing(snapshot)
        if why:
            seen.failing.append((snapshot.name, why))
        elif snapshot.phase == "Running" and snapshot.ready:
            seen.ready[rtype] += 1
            host = (body.get("status") or {}).get("hostIP")
            if rtype == "Supervisor" and host:
                seen.supervisor_hosts.append(str(host))
        else:
            seen.not_ready.append(snapshot.name)
    return seen


def _failing(pod: PodState) -> str:
    """Why a pod will not come up by waiting, or "" if it still may."""
    if pod.phase == "Failed":
        return f"failed ({pod.reason})" if pod.reason else "failed"
    if pod.reason in FAILING_REASONS:
        return pod.reason
    for container in pod.containers:
        if container.reason in FAILING_REASONS:
            return f"{container.name}: {container.reason}"
        if container.restart_count > 0 and container.exit_code not in (None, 0):
            return f"{container.name} exited with code {container.exit_code}"
    return ""


def _node_port(service: Mapping[str, Any] | None) -> int | None:
    for port in ((service or {}).get("spec") or {}).get("ports") or ():
        if port.get("name") == "web" and port.get("nodePort"):
            return int(port["nodePort"])
    return None


class KubernetesClusterClient(ClusterClient):
    """A Mars cluster in a namespace of its own: ``stop()`` deletes the namespace."""

    def __init__(self, kube_api_client: Any, namespace: str, endpoint: str) -> None:
        super().__init__(namespace, endpoint)
        self._kube = _Kube(kube_api_client)
        self.kube_api_client = kube_api_client

    def stop(self, wait: bool = True, timeout: float | None = None) -> None:
        """Delete the cluster's namespace; with ``wait``, until it is gone."""
        if self._session is not None:
            close = getattr(self._session, "close", None)
            if callable(close):
                close()
            self._session = None
        if not self._kube.delete_namespace(self.namespace) or not wait:
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._kube.namespace(self.namespace) is not None:
            if deadline is not None and time.monotonic() >= deadline:
                raise ClusterError(
                    f"namespace {self.namespace} is still being deleted after {timeout:g} s; "
                    f"`kubectl get all -n {self.namespace}` shows what holds it"
                )
            time.sleep(0.2)


def new_cluster(
    kube_api_client: Any,
    image: str | None = None,
    *,
    supervisor_num: int = 1,
    supervisor_cpu: float = 1,
    supervisor_mem: int | str = "4g",
    supervisor_extra_env: Mapping[str, str] | None = None,
    worker_num: int = 1,
    worker_cpu: float | None = None,
    worker_mem: int | str | None = None,
    worker_spill_paths: list[str] | None = None,
    worker_cache_mem: int | str | None = None,
    min_worker_num: int | None = None,
    worker_extra_env: Mapping[str, str] | None = None,
    namespace: str | None = None,
    timeout: float | None = None,
    keep_on_failure: bool = False,
    poll_interval: float = 0.5,
    console: Console | None = None,
    read_pod: PodReader,
) -> KubernetesClusterClient:
    """Start a Mars cluster in a new namespace and return once it is ready.

    ``worker_cpu`` and ``worker_mem`` are required. Sizes are bytes or carry units
    (``"16g"``); ``worker_cache_mem`` may be a percentage of ``worker_mem``. ``timeout``
    (seconds, None: no limit) bounds the wait for readiness. ``image`` defaults to
    ``kubemill-mars:<version>`` (``scripts/build-image.sh mars``), which the cluster must be
    able to pull: push it to its registry and pass that name. ``read_pod`` reads a pod's
    body (:mod:`kubemill.deploy.kubernetes` gives the substrate's).
    """
    spec = cluster_spec(
        image=image,
        supervisor_num=supervisor_num,
        supervisor_cpu=supervisor_cpu,
        supervisor_mem=supervisor_mem,
        supervisor_extra_env=dict(supervisor_extra_env) if supervisor_extra_env else None,
        worker_num=worker_num,
        worker_cpu=worker_cpu,
        worker_mem=worker_mem,
        worker_spill_paths=list(worker_spill_paths) if worker_spill_paths else None,
        worker_cache_mem=worker_cache_mem,
        min_worker_num=min_worker_num,
        worker_extra_env=dict(worker_extra_env) if worker_extra_env else None,
    )
    kube = _Kube(kube_api_client)
    namespace = namespace or f"mars-{secrets.token_hex(4)}"
    if kube.namespace(namespace) is not None:
        raise ClusterError(
            f"namespace {namespace} exists already: a Mars cluster gets a namespace of its "
            "own, which stop() deletes whole; give another name, or none to have one made"
        )
    kube.create(build_namespace(namespace, CLUSTER_NAME))
    client = KubernetesClusterClient(kube_api_client, namespace, "")
    try:
        for body in build_cluster(CLUSTER_NAME, namespace, spec):
            kube.create(body)
        client.endpoint = _wait_ready(
            kube,
            namespace,
            spec,
            timeout=timeout,
            poll=poll_interval,
            console=console,
            read_pod=read_pod,
        )
    except BaseException as exc:
        if not keep_on_failure:
            kube.delete_namespace(namespace)
        if isinstance(exc, ClusterError):
            kept = (
                f"namespace {namespace} is kept (keep_on_failure=True): stop it with "
                f"KubernetesClusterClient(api_client, {namespace!r}, '').stop()"
                if keep_on_failure
                else f"namespace {namespace} was deleted (keep_on_failure=True keeps it)"
            )
            raise ClusterError(f"{exc}\n{kept}") from None
        raise
    return client


def _wait_ready(
    kube: _Kube,
    namespace: str,
    spec: MarsClusterSpec,
    *,
    timeout: float | None,
    poll: float,
    console: Console | None,
    read_pod: PodReader,
) -> str:
    """Wait for the cluster's readiness; its endpoint, or :class:`ClusterError`."""
    needed = ready_needed(spec)
    wanted = {"Supervisor": spec.supervisor_num, "Worker": spec.worker_num}
    deadline = None if timeout is None else time.monotonic() + timeout
    service = object_names(CLUSTER_NAME)["Service"]
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} ready"),
        TimeElapsedColumn(),
        console=console or Console(stderr=True),
        transient=False,
    )
    tasks: dict[str, TaskID] = {
        rtype: progress.add_task(f"Mars {ROLES[rtype]}s in {namespace}", total=wanted[rtype])
        for rtype in ROLES
    }
    with progress:
        while True:
            seen = _readiness(kube.pods(namespace), read_pod)
            for rtype, task in tasks.items():
                progress.update(task, completed=seen.ready[rtype])
            if seen.failing:
                raise ClusterError(_failure(kube, namespace, seen, needed))
            enough = all(seen.ready[rtype] >= count for rtype, count in needed.items())
            node_port = _node_port(kube.service(namespace, service)) if enough else None
            if enough and node_port is not None and seen.supervisor_hosts:
                return f"http://{seen.supervisor_hosts[0]}:{node_port}"
            if deadline is not None and time.monotonic() >= deadline:
                raise ClusterError(_timeout(kube, namespace, seen, needed, timeout, node_port))
            time.sleep(poll)


def _counts(seen: _Readiness, needed: Mapping[str, int]) -> str:
    return ", ".join(
        f"{seen.ready[rtype]} of {count} {ROLES[rtype]}(s) needed ready"
        for rtype, count in needed.items()
    )


def _logs(kube: _Kube, namespace: str, pods: list[str]) -> str:
    parts = []
    for pod in pods:
        tail = kube.log_tail(namespace, pod, LOG_LINES).rstrip("\n")
        indented = "\n".join(f"    {line}" for line in tail.splitlines()) or "    (empty log)"
        parts.append(f"  {pod}, last log lines:\n{indented}")
    return "\n".join(parts)


def _failure(kube: _Kube, namespace: str, seen: _Readiness, needed: Mapping[str, int]) -> str:
    pods = ", ".join(f"{name} ({why})" for name, why in seen.failing)
    return (
        f"the Mars cluster in namespace {namespace} cannot start: {pods}; "
        f"{_counts(seen, needed)}\n{_logs(kube, namespace, [name for name, _ in seen.failing])}"
    )


def _timeout(
    kube: _Kube,
    namespace: str,
    seen: _Readiness,
    needed: Mapping[str, int],
    timeout: float | None,
    node_port: int | None,
) -> str:
    enough = all(seen.ready[rtype] >= count for rtype, count in needed.items())
    what = (
        "its web Service has no node port yet"
        if enough and node_port is None
        else _counts(seen, needed)
    )
    text = f"the Mars cluster in namespace {namespace} was not ready within {timeout:g} s: {what}"
    if seen.not_ready:
        text += f"\n{_logs(kube, namespace, seen.not_ready)}"
    return text


__all__ = ["ContainerState", "KubernetesClusterClient", "PodReader", "PodState", "new_cluster"]
